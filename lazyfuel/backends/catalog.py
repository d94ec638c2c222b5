"""The backends this process knows: each backend package registers itself here, by data.

A backend package (`lazyfuel/backends/<name>/__init__.py`) calls `register(BackendInfo(...))` when
it is imported: its name, its rank when costs tie, the contract documents it ships, the function
that registers its executor and link registries (`plug_in`, called only when something is run),
and its optional helpers: the fingerprint of the device it runs on, the backends a result of its
may cross to in device memory, page-locked host memory, the devices it lists, its cost priors
(`kernels`, handed down to the registry layer on registration, and `prior()`, its device's rates
and link), its tunable kernel shapes (`tuning`) and the class of its device-resident results
(`device_array`). The layers above ask this catalog (`registered()`, `info(backend)`,
`device_pairs()`, `pinned_host(nbytes)`, `listed_devices()`, `describe_devices()`,
`choose_device()`, `device_array_type()`, `backend_choices()`, `device_prior(backend)`) and never
name a concrete backend. `registered()` imports every package under `lazyfuel/backends/` first
(`discover()`), so a new backend is a new package and nothing else. Importing a backend package
registers its info only: it opens no device and imports no driver.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lazyfuel.contracts.model import Backend
from lazyfuel.registry.cost import UNKNOWN_DEVICE, DevicePrior, Throughput, use_throughput

Shape = tuple[int, int]  # a tuned kernel's launch shape: workgroup size x elements per invocation


@dataclass(frozen=True)
class TunedFamily:
    """One kernel family whose launch shape the judge may tune on a backend's default device.

    `binding_of(bindings)`: the binding the judge times it on (None: none here); `with_shape(shape,
    run)`: `run()` with the family's shape set to `shape` on the device (restored after)."""

    family: str
    revision: str
    default: Shape
    max_workgroup_size: int
    binding_of: Callable[[Sequence[Any]], Any]
    with_shape: Callable[[Shape, Callable[[], Any]], Any]


@dataclass(frozen=True)
class Tuning:
    """A backend's kernel-shape tuning, wired to the judge by the layer above (`lazyfuel.shape_tuning`).

    `families(runner)`: the tuned families on the device of `runner` (the backend's executor);
    `apply(runner, picks)`: make `runner`'s device use the picked shapes ({family: shape}) now;
    `use_cached(source)`: devices opened from now on start from the shapes
    `source(fingerprint, revisions, defaults)` returns (the judge cache's picks for that device)."""

    families: Callable[[Any], list[TunedFamily]]
    apply: Callable[[Any, Mapping[str, Shape]], None]
    use_cached: Callable[[Callable[[str, dict[str, str], dict[str, Shape]], dict[str, Shape]]], None]


@dataclass(frozen=True)
class BackendInfo:
    """What a backend tells the layers above about itself (see the module docstring).

    `rank`: lower is preferred where costs tie (a device first, the numpy reference last).
    `documents`: contract documents under `lazyfuel/contracts/`, loaded in this order.
    `plug_in()`: registers the executor and link registries (idempotent; may import drivers).
    `fingerprint()`: the device the backend runs on here, as the judge keys measurements by.
    `shares_memory_with`: backends that can read a result of this one where it lies in device memory
    (`graph.crossing`; this backend's executor is then a `MemoryExporter`).
    `pinned(nbytes)`: a uint8 numpy array of page-locked host memory of its default device.
    `devices()`: the devices it sees, as plain records (`lf.devices`); `describe_devices()`: what
    `lazyfuel devices` prints; `choose_device(wanted, source)`: the device `wanted` (an index or
    a name part; None: the one it would pick) names, RuntimeError naming the devices if none.
    `kernels`: its kernels' rates before any measurement on any device (the registry prices its
    declared and unmeasured costs with them); `prior()`: the rates and host link of the device it
    runs on here (may open the device; None: `kernels` and no link, the host's own memory).
    `tuning`: its kernel shapes the judge tunes (None: nothing to tune).
    `device_array()`: the class of a whole result kept in its device memory (`lf.DeviceArray`).
    `in_host_memory`: its kernels read and write host memory (the numpy reference): nothing it
    reads crosses a link, and its copy is what copying on the host costs.
    `spread_devices()`: the device numbers a graph's blocks are spread over here (one per pool, a
    device repeated for each of its pools: what `distributed.local_gpu_cluster` pins workers to);
    `default_pool()`: the pool this process opens (`id`, `index`, `label`: `distributed.worker_device`).
    """

    backend: Backend
    rank: int
    documents: tuple[str, ...]
    plug_in: Callable[[], None]
    fingerprint: Callable[[], str] | None = None
    shares_memory_with: tuple[Backend, ...] = ()
    pinned: Callable[[int], Any] | None = None
    devices: Callable[[], list[Any]] | None = None
    describe_devices: Callable[[], str] | None = None
    choose_device: Callable[[str | None, str], Any] | None = None
    kernels: Throughput = UNKNOWN_DEVICE
    prior: Callable[[], DevicePrior] | None = None
    tuning: Tuning | None = None
    device_array: Callable[[], type] | None = None
    in_host_memory: bool = False
    spread_devices: Callable[[], list[int]] | None = None
    default_pool: Callable[[], dict[str, Any]] | None = None

    def device_prior(self) -> DevicePrior:
        """The prior rates of this backend on its device here (`prior()`, else `kernels`, no link)."""
        return self.prior() if self.prior is not None else DevicePrior("unknown", self.kernels)


_lock = threading.RLock()
_infos: dict[Backend, BackendInfo] = {}
_discovered = False


def register(found: BackendInfo) -> None:
    """Make `found` known (idempotent for an equal info; ValueError for another one of its name)."""
    with _lock:
        known = _infos.get(found.backend)
        if known is not None and known != found:
            raise ValueError(f"backend {found.backend} is already registered (by "
                             f"{known.plug_in.__module__}); cannot register it again differently")
        _infos[found.backend] = found
        use_throughput(found.backend, found.kernels, host=found.in_host_memory)


def discover() -> None:
    """Import every backend package under `lazyfuel/backends/` once (each registers itself)."""
    global _discovered
    with _lock:
        if _discovered:
            return
        import lazyfuel.backends as package

        for module in pkgutil.iter_modules(package.__path__, f"{package.__name__}."):
            if module.ispkg:
                importlib.import_module(module.name)
        _discovered = True


def registered() -> tuple[BackendInfo, ...]:
    """Every known backend, best first (by rank)."""
    discover()
    with _lock:
        return tuple(sorted(_infos.values(), key=lambda found: found.rank))


def info(backend: Backend) -> BackendInfo:
    """`backend`'s info; LookupError naming the registered backends if it has none."""
    for found in registered():
        if found.backend is backend:
            return found
    known = " ".join(found.backend.name for found in registered()) or "none"
    raise LookupError(f"no backend package registers {backend}; registered: {known}")


def device_pairs() -> set[tuple[Backend, Backend]]:
    """(source, target) pairs where `target` can read a result of `source` in device memory."""
    return {(found.backend, target) for found in registered() for target in found.shares_memory_with}


def pinned_host(nbytes: int) -> Any:
    """`nbytes` of page-locked host memory (a uint8 numpy array) from the best backend that has it;
    RuntimeError if none does (the backend's own error if it cannot run here)."""
    for found in registered():
        if found.pinned is not None:
            return found.pinned(nbytes)
    raise RuntimeError("no registered backend provides page-locked host memory")


def listed_devices() -> list[Any]:
    """The devices of the best backend that lists its devices (empty if none does or it sees none)."""
    for found in registered():
        if found.devices is not None:
            return found.devices()
    return []


def _best(field: str) -> BackendInfo | None:
    """The best registered backend whose info has `field` set, or None."""
    return next((found for found in registered() if getattr(found, field) is not None), None)


def describe_devices() -> str:
    """What `lazyfuel devices` prints: the best backend's that describes its devices."""
    found = _best("describe_devices")
    return found.describe_devices() if found is not None else "no backend lists devices here"


def choose_device(wanted: str | None = None, source: str = "LAZYFUEL_DEVICE") -> Any:
    """The device `wanted` names (None: the one the best device backend picks), as a plain record;
    RuntimeError naming the devices where none matches or no backend lists devices."""
    found = _best("choose_device")
    if found is None:
        raise RuntimeError("no registered backend lists devices")
    return found.choose_device(wanted, source)


def device_array_type() -> type:
    """The class of a result kept whole in device memory (`lf.DeviceArray`: the best backend's)."""
    found = _best("device_array")
    if found is None:
        raise RuntimeError("no registered backend keeps results in device memory")
    return found.device_array()


def backend_choices() -> tuple[str, ...]:
    """What `LAZYFUEL_BACKEND` and every `--backend` accept: auto (plan over every usable one), or
    one registered backend's name in lower case, best first."""
    return ("auto", *(found.backend.name.lower() for found in registered()))


def device_prior(backend: Backend) -> DevicePrior:
    """`backend`'s prior rates on its device here (`BackendInfo.device_prior`)."""
    return info(backend).device_prior()


def pinnable() -> BackendInfo:
    """The best registered backend whose workers can be pinned to a device (`spread_devices` and
    `default_pool`: `lazyfuel.distributed`); RuntimeError naming the registered ones if none."""
    for found in registered():
        if found.spread_devices is not None and found.default_pool is not None:
            return found
    names = ", ".join(found.backend.name for found in registered()) or "none"
    raise RuntimeError(f"no registered backend has devices to pin dask workers to (registered: {names})")
