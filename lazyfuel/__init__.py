"""lazyfuel: lazy data-selection pipelines over chunked arrays, run on Vulkan devices.

    import lazyfuel as lf
    x = lf.from_array(a, chunks=1000)
    y = x.T.index_select(0, idx).masked_fill(mask, 0.0)   # lazy
    s = lf.rfft(y, axis=-1)                                # lazy, numpy.fft's semantics
    print(lf.explain(y))                                   # what each fused task will run
    with lf.profile() as p:
        out = y.compute()                                  # numpy
"""

from __future__ import annotations

from typing import Any

from lazyfuel.api import (
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
from lazyfuel.profiling import profile
from lazyfuel.registry import NoBindingError, Registry

__all__ = [
    "Array",
    "ContractError",
    "NoBindingError",
    "Registry",
    "asarray",
    "broadcast_to",
    "contiguous",
    "devices",
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
    """The Vulkan devices this process sees (plain `DeviceInfo` records); empty if none."""
    from lazyfuel.backends.vulkan import list_devices

    return list_devices()
