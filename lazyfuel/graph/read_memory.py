"""The memory read tasks hold: the byte budget they share (`read_budget`, `ByteBudget`; the one
instance is `graph.stored.BUDGET`), scratch buffers for byte ranges (`_Scratch`) and each read
thread's buffer for a chunk's compressed bytes (`_Held`).
"""

from __future__ import annotations

import os
import threading

import numpy as np

from lazyfuel import host_memory as host_memory_module
from lazyfuel.settings import config

host_memory = host_memory_module.total  # bytes of physical memory of this machine


def read_budget() -> int:
    """The bytes of chunk data the read tasks of one compute may hold at once:
    `lazyfuel.config.read_budget`, a fraction of `host_memory` or a number of bytes. Read when
    the graph is built (in the caller's `lf.config`), carried by each `StoredReader`."""
    return max(1, host_memory_module.budget_bytes(config.read_budget))


class ByteBudget:
    """A count of the chunk bytes that read threads hold: a thread takes its bytes before it
    holds chunk data and gives them back after, waiting while they would not fit under the
    limit it was given (`read_budget`). `peak` is the most ever held at once."""

    def __init__(self) -> None:
        self.held = self.peak = 0
        self._changed = threading.Condition()

    def take(self, nbytes: int, limit: int) -> int:
        """Wait until `nbytes` (at most `limit`) fit under `limit`, take them; what was taken."""
        nbytes = max(0, min(int(nbytes), int(limit)))
        with self._changed:
            self._changed.wait_for(lambda: self.held + nbytes <= limit or self.held == 0)
            self.held += nbytes
            self.peak = max(self.peak, self.held)
        return nbytes

    def give(self, nbytes: int) -> None:
        """Give back bytes `take` returned."""
        with self._changed:
            self.held -= nbytes
            self._changed.notify_all()


class _Scratch:
    """Read and decode buffers kept for the next chunk: a fresh 64 MiB buffer per chunk costs its
    page faults again (about as long as decoding it here). At most `keep` are kept, process-wide."""

    def __init__(self, keep: int) -> None:
        self.keep, self.free = keep, []
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> np.ndarray:
        with self._lock:
            for i, buf in enumerate(self.free):
                if buf.nbytes == nbytes:
                    return self.free.pop(i)
        return np.empty(nbytes, np.uint8)

    def give(self, buf: np.ndarray) -> None:
        with self._lock:
            self.free = [*self.free, buf][-self.keep:]


class _Held(threading.local):
    """Each read thread's buffer for a chunk's compressed bytes, grown to the largest it read:
    a fresh buffer per chunk of tens of MB is what glibc's arenas keep after it is freed."""

    def __init__(self) -> None:
        self.buf = np.empty(0, np.uint8)

    def read(self, file: str) -> np.ndarray | None:
        """The bytes of `file` (a view of this thread's buffer), or None when there is none."""
        try:
            fd = os.open(file, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            size = os.fstat(fd).st_size
            if self.buf.nbytes < size:
                self.buf = np.empty(0, np.uint8)  # the old one goes first
                self.buf = np.empty(size, np.uint8)
            view = self.buf[:size]
            if size and os.preadv(fd, [view], 0) != size:
                raise OSError(f"zarr chunk {file} changed size while it was read")
            return view
        finally:
            os.close(fd)


_HELD = _Held()


def _stored_size(file: str | None) -> int | None:
    """The size of a local chunk file (None when it is not local or not there)."""
    try:
        return os.stat(file).st_size if file is not None else None
    except FileNotFoundError:
        return None
