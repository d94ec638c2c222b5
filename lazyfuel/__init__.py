"""lazyfuel: lazy data-selection pipelines over chunked arrays, run on Vulkan devices.

    import lazyfuel as lf
    x = lf.from_array(a, chunks=1000)
    y = x.T.index_select(0, idx).masked_fill(mask, 0.0)   # lazy
    s = lf.rfft(y, axis=-1)                                # lazy, numpy.fft's semantics
    print(lf.explain(y))                                   # what each fused task will run
    with lf.config(backend="cpu"):                         # knobs (README: Configuration)
        y.compute()
    with lf.profile() as p:
        out = y.compute()                                  # numpy
"""

from __future__ import annotations

from typing import Any

from lazyfuel.api import (
    OP_FUNCTIONS,
    Array,
    asarray,
    broadcast_to,
    contiguous,
    explain,
    fft,
    from_array,
    from_zarr,
    gather,
    ifft,
    index_select,
    irfft,
    masked_fill,
    rfft,
    transpose,
)
from lazyfuel.contracts import parse_contracts
from lazyfuel.contracts.model import ContractError
from lazyfuel.judge import UnmeasuredCostWarning
from lazyfuel.profiling import profile
from lazyfuel.registry import NoBindingError, Registry
from lazyfuel.registry.links import set_discovery
from lazyfuel.settings import config

__all__ = [
    "Array",
    "ContractError",
    "DeviceArray",
    "NoBindingError",
    "Registry",
    "UnmeasuredCostWarning",
    "asarray",
    "broadcast_to",
    "config",
    "contiguous",
    "devices",
    "empty_pinned",
    "explain",
    "fft",
    "from_array",
    "from_zarr",
    "gather",
    "ifft",
    "index_select",
    "irfft",
    "load_contracts",
    "masked_fill",
    "parse_contracts",
    "profile",
    "registry",
    "rfft",
    "transpose",
]
# the ops whose graph module declares their builder (`lf.flip` ...): exported without an edit here
globals().update(OP_FUNCTIONS)
__all__ += list(OP_FUNCTIONS)


def _register_builtin_providers() -> None:
    """Register the built-in providers (their link registries, executors), imported on first use."""
    from lazyfuel.providers import register_builtin_providers

    register_builtin_providers()


# a fresh process can link a document into any Registry without building the default one first
set_discovery(_register_builtin_providers)


def registry() -> Registry:
    """The default registry: every contract document the project ships (built once per process)."""
    from lazyfuel.providers import default_registry

    return default_registry()


def load_contracts(path_or_text: Any, registry: Registry | None = None) -> list:
    """Parse, link and add a contract document (a path or its text); returns its bindings.

    Into the default registry when `registry` is None. ContractError (`.path .line .key`) if the
    document is malformed or a key is already claimed by a different kernel.
    """
    from lazyfuel.providers import default_registry

    return (registry if registry is not None else default_registry()).load(path_or_text)


def devices() -> list:
    """The Vulkan devices this process sees (plain `DeviceInfo` records); empty if none (the devices
    of the best backend whose package lists them: `backends.catalog`)."""
    from lazyfuel.backends.catalog import listed_devices

    return listed_devices()


def empty_pinned(shape: Any, dtype: Any = "float32") -> Any:
    """A numpy array of `shape` and `dtype` in page-locked host memory of the default Vulkan
    device (the best backend whose package provides such memory: `backends.catalog`; contents
    undefined), as `torch.Tensor.pin_memory()` or `cupyx.empty_pinned` give.

    Inputs read from such arrays (or views of them) and results computed into them
    (`x.compute(out=...)`) need no CPU copy into staging and no pinning per run: kernels write
    results into them in place, and read inputs in place where the program reads them once in
    long rows (else the device copies them in). Elsewhere (another device, CPU kernels) they are
    ordinary numpy arrays. Freed when the last view of them is gone. Raises TypeError for a dtype
    lazyfuel does not know, MemoryError where the driver has no such memory left.
    """
    import math

    import numpy as np

    from lazyfuel.backends.catalog import pinned_host
    from lazyfuel.checks import int_sequence
    from lazyfuel.dtypes import DType

    dt = DType.from_numpy(np.dtype(dtype)).numpy
    dims = int_sequence(shape, "empty_pinned: shape")
    if any(d < 0 for d in dims):
        raise ValueError(f"empty_pinned: shape must hold non-negative ints, got {shape!r}")
    nbytes = math.prod(dims) * dt.itemsize
    return pinned_host(nbytes).view(dt).reshape(dims)


def __getattr__(name: str) -> Any:
    """`lazyfuel.DeviceArray` (what `compute(device=True)` returns), looked up on first use: the
    class of the best backend that keeps results in device memory (`backends.catalog`), which
    `import lazyfuel` does not load."""
    if name == "DeviceArray":
        from lazyfuel.backends.catalog import device_array_type

        return device_array_type()
    raise AttributeError(f"module 'lazyfuel' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), "DeviceArray"])
