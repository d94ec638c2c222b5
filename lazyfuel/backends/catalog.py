"""The backends this process knows: each backend package registers itself here, by data.

A backend package (`lazyfuel/backends/<name>/__init__.py`) calls `register(BackendInfo(...))` when
it is imported: its name, its rank when costs tie, the contract documents it ships, the function
that registers its executor and link registries (`plug_in`, called only when something is run),
and its optional helpers: the fingerprint of the device it runs on, the backends a result of its
may cross to in device memory, page-locked host memory, the devices it lists. The layers above
ask this catalog (`registered()`, `info(backend)`, `device_pairs()`, `pinned_host(nbytes)`,
`listed_devices()`) and never name a concrete backend. `registered()` imports every package under
`lazyfuel/backends/` first (`discover()`), so a new backend is a new package and nothing else.
Importing a backend package registers its info only: it opens no device and imports no driver.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lazyfuel.contracts.model import Backend


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
    `devices()`: the devices it sees, as plain records (`lf.devices`).
    """

    backend: Backend
    rank: int
    documents: tuple[str, ...]
    plug_in: Callable[[], None]
    fingerprint: Callable[[], str] | None = None
    shares_memory_with: tuple[Backend, ...] = ()
    pinned: Callable[[int], Any] | None = None
    devices: Callable[[], list[Any]] | None = None


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
