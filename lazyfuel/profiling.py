"""Counting what really ran: submits, dispatches, bytes moved, bindings and devices used, time on
the device.

Executors call `record(...)` after each batch (bytes up and down cross the host link; `bytes_peer`
are copied between two devices' memories without it); `with profile() as p:` collects every record made
by any thread of this process while the block runs (dask's threaded scheduler included).
`device_seconds` is the wall time from submit to fence; `kernel_seconds` the GPU time of the
programs' steps alone (uploads and downloads left out), which a backend with a device clock
(Vulkan: timestamp queries) records while a profile is `active()`: it costs two timestamps per
program, so they are written only then.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Profile:
    """Totals over a `profile()` block."""

    submits: int = 0
    dispatches: int = 0
    bytes_uploaded: int = 0
    bytes_downloaded: int = 0
    bytes_peer: int = 0  # copied device to device between pools (or GPUs), never through the host
    device_seconds: float = 0.0
    kernel_seconds: float = 0.0  # GPU time of the steps alone, by the backends that clock it
    programs: int = 0
    bindings: Counter = field(default_factory=Counter)
    devices: Counter = field(default_factory=Counter)  # device label -> programs run there
    where: Counter = field(default_factory=Counter)  # (backend name, device label) -> programs

    def __str__(self) -> str:
        used = ", ".join(f"{k} x{n}" for k, n in sorted(self.bindings.items())) or "none"
        where = "; devices: " + ", ".join(f"{k} x{n}" for k, n in sorted(self.devices.items()))
        return (f"{self.programs} program(s), {self.submits} submit(s), {self.dispatches} dispatch(es), "
                f"{self.bytes_uploaded} B up, {self.bytes_downloaded} B down, "
                f"{f'{self.bytes_peer} B device to device, ' if self.bytes_peer else ''}"
                f"{self.device_seconds * 1e3:.3f} ms on the device ({self.kernel_seconds * 1e3:.3f} ms "
                f"in kernels); bindings: {used}"
                f"{where if self.devices else ''}")


_active: list[Profile] = []
_lock = threading.Lock()


def record(*, submits: int = 0, dispatches: int = 0, bytes_uploaded: int = 0,
           bytes_downloaded: int = 0, bytes_peer: int = 0, device_seconds: float = 0.0,
           kernel_seconds: float = 0.0,
           bindings: tuple[str, ...] = (), programs: int = 0, device: str | None = None,
           backend: str | None = None) -> None:
    """Add to every active profile (cheap when none is active); `backend` and `device` name where
    the `programs` ran."""
    if not _active:
        return
    with _lock:
        for p in _active:
            p.submits += submits
            p.dispatches += dispatches
            p.bytes_uploaded += bytes_uploaded
            p.bytes_downloaded += bytes_downloaded
            p.bytes_peer += bytes_peer
            p.device_seconds += device_seconds
            p.kernel_seconds += kernel_seconds
            p.programs += programs
            p.bindings.update(bindings)
            if device is not None:
                p.devices[device] += programs
            if backend is not None:
                p.where[(backend, device or "")] += programs


def active() -> bool:
    """Whether a `profile()` block is collecting now (backends then clock their kernels)."""
    return bool(_active)


@contextmanager
def profile() -> Iterator[Profile]:
    """Collect what runs in this process while the block runs: `with lf.profile() as p: …`."""
    p = Profile()
    with _lock:
        _active.append(p)
    try:
        yield p
    finally:
        with _lock:
            _active.remove(p)
