"""Reading the byte spans of one local chunk file with several reads in flight.

A read task of raw rows (`graph.stored._ranged_rows`) over a local store hands its merged spans
(`byte_ranges.coalesced`) to `read_file_spans`: up to `SPANS_IN_FLIGHT` of them are read at once
by `os.preadv` on a small pool of I/O threads shared by the process (`READ_THREADS`, as many as
TensorStore's default `file_io_concurrency`: max(4, CPUs)), each into its own kept buffer, and
the calling thread places each span (copies its rows out) as it arrives, in order, while the
next ones are read. One thread reading and placing in turn leaves the disk idle while it copies;
with two dask threads that was 20-30% of a 262k-row read of a raw store. How many spans one call
keeps in flight is bounded by the bytes it took from the read budget (`room`), so concurrency
never holds more than `read_budget` allows. `IN_FLIGHT` counts the reads requested and not yet
placed (its peak is what the tests check).
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from lazyfuel.graph.byte_ranges import RANGE_BYTES, SPANS_IN_FLIGHT
from lazyfuel.graph.read_memory import _Scratch

READ_THREADS = max(4, os.cpu_count() or 1)
"""Threads of the process-wide pool that reads local chunk files' spans."""

SPAN_SCRATCH = _Scratch(keep=2 * READ_THREADS)
"""Kept span buffers (`RANGE_BYTES` each): every call in flight takes up to `SPANS_IN_FLIGHT`."""


class InFlight:
    """A count of the span reads requested and not yet collected in this process (being read, or
    read and waiting for their turn to be placed), and the most ever at once."""

    def __init__(self) -> None:
        self.now = self.peak = 0
        self._lock = threading.Lock()

    def enter(self) -> None:
        with self._lock:
            self.now += 1
            self.peak = max(self.peak, self.now)

    def leave(self) -> None:
        with self._lock:
            self.now -= 1


IN_FLIGHT = InFlight()


class ShortFile(OSError):
    """A chunk file that ends before a span it should hold (it was truncated or replaced)."""


class _Pool:
    """The I/O threads, started on first use (and again in a forked child, which has none)."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def get(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None or self._pid != os.getpid():
                self._pool = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="lazyfuel-read")
                self._pid = os.getpid()
            return self._pool


_POOL = _Pool()


def depth_for(spans: Sequence[tuple[int, int, slice]], room: int) -> int:
    """How many of `spans` one call reads at once: at most `SPANS_IN_FLIGHT` and as many as there
    are; all of those when `room` bytes hold every span, else as many of the longest as fit in
    `room` (at least 1)."""
    if not spans:
        return 0
    lengths = [hi - lo for lo, hi, _ in spans]
    most = min(SPANS_IN_FLIGHT, len(spans))
    return most if sum(lengths) <= room else max(1, min(most, room // max(1, max(lengths))))


def read_file_spans(fd: int, name: str, spans: Sequence[tuple[int, int, slice]],
                    place: Callable[[int, slice, np.ndarray], None], room: int) -> None:
    """Read each span `(first byte, end byte, part)` of the open file `fd` (`name` for errors)
    and `place(first byte, part, bytes)` it, in the order given; `depth_for(spans, room)` reads
    in flight at once (one span alone is read in this thread). `ShortFile` when the file ends
    before a span does. Every read has finished when this returns or raises."""
    depth = depth_for(spans, room)
    if depth == 0:
        return
    buffers = [SPAN_SCRATCH.take(RANGE_BYTES) for _ in range(depth)]
    pending: deque[tuple[int, int, slice, np.ndarray, Future[int] | None]] = deque()  # .., buffer, read
    todo = iter(spans)
    pool = _POOL.get() if depth > 1 else None

    def start(buf: np.ndarray) -> None:
        """Request the next span into `buf` (nothing when none is left)."""
        span = next(todo, None)
        if span is None:
            return
        lo, hi, part = span
        job = None if pool is None else pool.submit(os.preadv, fd, [buf[:hi - lo]], lo)
        IN_FLIGHT.enter()
        pending.append((lo, hi, part, buf, job))

    try:
        for buf in buffers:
            start(buf)
        while pending:
            lo, hi, part, buf, job = pending.popleft()
            try:
                got = os.preadv(fd, [buf[:hi - lo]], lo) if job is None else job.result()
            finally:
                IN_FLIGHT.leave()
            if got != hi - lo:
                raise ShortFile(f"zarr chunk {name} is shorter than its rows ({hi} bytes)")
            place(lo, part, buf[:hi - lo])
            start(buf)
    finally:
        for *_, job in pending:  # a read still under way writes into its buffer: wait for it
            if job is not None:
                job.exception()
            IN_FLIGHT.leave()
        for buf in buffers:
            SPAN_SCRATCH.give(buf)
