"""The Vulkan backend: device pool, memory, pipelines, batched dispatch, kernels, link registries.

Public entry points (no Vulkan handles or cffi types leave this package):
- `get_pool(device=None, replica=0)`: the process's `DevicePool` for a device (built on first use,
  shared by threads, closed at exit); `spread_labels()`: the pools blocks are spread over;
- `VulkanExecutor`: runs a planner `Program` as one command buffer (`device=i`: on spread pool i);
- `list_devices()` / `describe_devices()`: what `lazyfuel devices` shows;
- `register()`: registers the executor (with its spread devices) and the link registries
  (`fuel_vulkan_backend::fkc::ENTRY_POINTS`, `lazyfuel::vulkan::ENTRY_POINTS`).
Importing this package registers its `BackendInfo` (`backends.catalog`: first where costs tie,
its results may stay in device memory for Cuda, page-locked host memory for `lf.empty_pinned`, the
devices `lf.devices` lists and `lazyfuel devices` shows, its cost priors by device kind
(`priors.py`), the kernel shapes the judge tunes (`shape_tuning_hook.py`), `lf.DeviceArray`) and touches
no device; the pool opens on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lazyfuel.backends.catalog import BackendInfo
from lazyfuel.backends.catalog import register as register_backend
from lazyfuel.backends.vulkan.priors import KERNELS, device_prior
from lazyfuel.backends.vulkan.shape_tuning_hook import TUNING
from lazyfuel.contracts.model import Backend

if TYPE_CHECKING:
    from lazyfuel.backends.vulkan.executor import VulkanExecutor
    from lazyfuel.backends.vulkan.pool import DevicePool

__all__ = ["VulkanExecutor", "describe_devices", "get_pool", "list_devices", "register", "spread_labels"]


def get_pool(device: int | str | None = None, replica: int = 0) -> DevicePool:
    """The process's device pool (see `lazyfuel.backends.vulkan.pool.get_pool`)."""
    from lazyfuel.backends.vulkan.pool import get_pool as _get_pool

    return _get_pool(device, replica)


def spread_labels() -> list[str]:
    """The pools a graph's blocks are spread over (`LAZYFUEL_DEVICES`), labelled; opens none."""
    from lazyfuel.backends.vulkan.pool import spread_labels as _labels

    return _labels()


def list_devices() -> list[Any]:
    """Every Vulkan device as a `DeviceInfo` (plain data)."""
    from lazyfuel.backends.vulkan.devices import list_devices as _list

    return _list()


def describe_devices() -> str:
    """The text `lazyfuel devices` prints."""
    from lazyfuel.backends.vulkan.devices import describe_devices as _describe

    return _describe()


def __getattr__(name: str) -> Any:
    if name == "VulkanExecutor":
        from lazyfuel.backends.vulkan.executor import VulkanExecutor

        return VulkanExecutor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_registered = False


def register() -> None:
    """Register the Vulkan executor and link registries (idempotent; opens no device)."""
    global _registered
    if _registered:
        return
    from lazyfuel.backends.base import register_executor
    from lazyfuel.backends.vulkan.executor import VulkanExecutor
    from lazyfuel.backends.vulkan.links import LINK_REGISTRIES

    register_executor(Backend.Vulkan, VulkanExecutor, devices=spread_labels)
    try:
        from lazyfuel.registry.links import register_link_registry
    except ImportError:  # the registry layer predates link registration by name
        register_link_registry = None
    if register_link_registry is not None:
        for name, factory in LINK_REGISTRIES.items():
            register_link_registry(name, factory)
    _registered = True


def pinned_host(nbytes: int) -> Any:
    """`nbytes` of page-locked host memory of the default pool's device (a uint8 numpy array)."""
    return get_pool().pinned.empty(nbytes)


def fingerprint() -> str:
    """The default pool's device fingerprint (`fingerprint.vulkan_fingerprint`)."""
    from lazyfuel.backends.vulkan.fingerprint import vulkan_fingerprint

    return vulkan_fingerprint()


def choose_device(wanted: str | None = None, source: str = "LAZYFUEL_DEVICE") -> Any:
    """The `DeviceInfo` `wanted` names (None: the one the pool picks); RuntimeError naming them."""
    from lazyfuel.backends.vulkan.devices import choose

    return choose(list_devices(), wanted, source=source)


def spread_devices() -> list[int]:
    """The physical device of each pool blocks are spread over (`pool.spread_slots`; opens none)."""
    from lazyfuel.backends.vulkan.pool import spread_slots

    return [index for index, _ in spread_slots()]


def default_pool() -> dict[str, Any]:
    """The pool this process opens: its `id`, device `index` and `label`."""
    pool = get_pool()
    return {"id": id(pool), "index": pool.info.index, "label": pool.label}


def device_array() -> type:
    """The class of a whole result kept in Vulkan memory (`lf.DeviceArray`)."""
    from lazyfuel.backends.vulkan.device_array import DeviceArray

    return DeviceArray


register_backend(BackendInfo(
    Backend.Vulkan, rank=10,
    documents=("vulkan_select.md", "vulkan_copy.md", "vulkan.md", "vulkan_strided.md", "vulkan_variants.md",
               "vulkan_broadcast.md"),
    plug_in=register, fingerprint=fingerprint, shares_memory_with=(Backend.Cuda,),
    pinned=pinned_host, devices=list_devices, describe_devices=describe_devices,
    choose_device=choose_device, kernels=KERNELS, prior=device_prior, tuning=TUNING,
    device_array=device_array, spread_devices=spread_devices, default_pool=default_pool))
