"""Reading the byte spans of one local chunk file: the disk kept busy, only the touched bytes copied.

A read task of raw rows (`graph.stored._ranged_rows`) over a local store hands its merged spans
(`byte_ranges.coalesced`) to `read_file_spans`. By default (`MAPPED`) the spans are cut into
windows of at most `RANGE_BYTES` span bytes (`windows_of`); the reads of up to `SPANS_IN_FLIGHT`
windows are asked of the kernel ahead (`posix_fadvise(WILLNEED)` on each span: queued, and run
while this thread works), and each window in turn is mapped (`mmap`, read-around off) and its
spans handed to `place` as views of the mapping, so rows go from the page cache straight to
their places. A 262k-row read of a 1.95 GB raw store (1 row in 8 touched, so every 64 KiB of it
read) then copies the 0.25 GB of rows in the process, not the 1.95 GB the spans hold, and the
disk still sees long ascending reads (this disk reads 2-3x faster ascending than scattered:
`benchmarks/probes/disk_depth.py`). A file shorter than its spans is found before it is mapped
(`ShortFile`); one truncated while mapped would fault (SIGBUS): stores are read this way because
their writers replace a chunk file whole (zarr writes a temporary file and renames it; lazyfuel
truncates only files of a store it has not published).

Where a file cannot be mapped its spans are copied instead (what `MAPPED = False` does for all):
up to `SPANS_IN_FLIGHT` `os.preadv` at once on a small pool of I/O threads shared by the process
(`READ_THREADS`, as many as TensorStore's default `file_io_concurrency`: max(4, CPUs)), each into
its own kept buffer, the calling thread placing each span as it arrives, in order, while the next
are read. Either way, how many windows (spans) one call keeps in flight is bounded by the bytes
it took from the read budget (`room`, `depth_for`); `IN_FLIGHT` counts those requested and not
yet placed (its peak is what the tests check).
"""

from __future__ import annotations

import mmap
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np

from lazyfuel.graph.byte_ranges import RANGE_BYTES, SPANS_IN_FLIGHT
from lazyfuel.graph.read_memory import _Scratch

MAPPED = True
"""Whether spans are placed from mappings of their file (else copied out of it by `os.preadv`)."""


def _will_need(fd: int, offset: int, length: int) -> None:
    """Ask the kernel to read `length` bytes of `fd` at `offset` ahead (a no-op where the system
    has no `posix_fadvise`, as macOS)."""
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_WILLNEED)

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


Span = tuple[int, int, slice]


def read_file_spans(fd: int, name: str, spans: Sequence[Span],
                    place: Callable[[int, slice, np.ndarray], None], room: int) -> None:
    """Read each span `(first byte, end byte, part)` of the open file `fd` (`name` for errors)
    and `place(first byte, part, bytes)` it, in the order given, with as many reads in flight as
    `room` bytes allow (`depth_for`): through mappings of the file (`MAPPED`), else, or where the
    file cannot be mapped, by copies. `ShortFile` when the file ends before a span does (the spans
    before it placed first). Every read this started has finished when it returns or raises."""
    if not spans:
        return
    if not MAPPED:
        _copied_spans(fd, name, spans, place, room)
        return
    size = os.fstat(fd).st_size
    short = next((i for i, (_, hi, _) in enumerate(spans) if hi > size), len(spans))
    done = _mapped_spans(fd, spans[:short], place, room)
    if done < short:  # this file cannot be mapped: the rest by copies
        _copied_spans(fd, name, spans[done:short], place, room)
    if short < len(spans):
        raise ShortFile(f"zarr chunk {name} is shorter than its rows ({spans[short][1]} bytes)")


def windows_of(spans: Sequence[Span], limit: int) -> list[Sequence[Span]]:
    """`spans` cut, in order, into runs holding at most `limit` span bytes each (at least one
    span): one mapping each, however far apart its spans lie (only touched pages cost memory)."""
    windows: list[Sequence[Span]] = []
    start = held = 0
    for i, (lo, hi, _) in enumerate(spans):
        if i > start and held + hi - lo > limit:
            windows.append(spans[start:i])
            start, held = i, 0
        held += hi - lo
    return [*windows, spans[start:]] if spans else []


def _mapped_spans(fd: int, spans: Sequence[Span], place: Callable[[int, slice, np.ndarray], None],
                  room: int) -> int:
    """Place `spans` (all within the file) from mappings of the file, a window at a time, the
    reads of up to `depth_for` windows asked of the kernel ahead; how many spans were placed: all,
    or fewer when mmap refused the file (before the first span of a window)."""
    windows = windows_of(spans, RANGE_BYTES)
    held = [(w[0][0], w[0][0] + sum(hi - lo for lo, hi, _ in w), w[0][2]) for w in windows]
    depth, asked, placed, done = depth_for(held, room), 0, 0, 0

    def ask() -> None:
        """Queue the next window's reads (the kernel reads them while this thread works)."""
        nonlocal asked
        for lo, hi, _ in windows[asked]:
            _will_need(fd, lo, hi - lo)
        IN_FLIGHT.enter()
        asked += 1

    try:
        while asked < depth:
            ask()
        for window in windows:
            try:
                mapped = _mapping(fd, window)
            except (OSError, ValueError, TypeError):  # TypeError: no `prot` (Windows' mmap)
                return done
            try:
                done += _place_mapped(mapped, window, place)
            finally:
                try:
                    mapped.close()
                except BufferError:  # `place` kept a view of it: the mapping goes with that view
                    pass
            placed += 1
            IN_FLIGHT.leave()
            if asked < len(windows):
                ask()
    finally:
        for _ in range(asked - placed):
            IN_FLIGHT.leave()
    return done


def _mapping(fd: int, window: Sequence[Span]) -> mmap.mmap:
    """A read-only mapping of `fd` from the page holding `window`'s first byte to its last byte,
    read-around off (the window's spans were asked for already)."""
    lo, hi = window[0][0], max(hi for _, hi, _ in window)
    base = lo - lo % mmap.ALLOCATIONGRANULARITY
    mapped = mmap.mmap(fd, hi - base, prot=mmap.PROT_READ, offset=base)
    mapped.madvise(mmap.MADV_RANDOM)
    return mapped


def _place_mapped(mapped: mmap.mmap, window: Sequence[Span], place: Callable[[int, slice, np.ndarray], None]
                  ) -> int:
    """`place` each span of `window` as a view of `mapped` (which starts at the page of the
    window's first byte); how many were placed. No view is left when this returns."""
    view = np.frombuffer(mapped, np.uint8)
    base = window[0][0] - window[0][0] % mmap.ALLOCATIONGRANULARITY
    for lo, hi, part in window:
        place(lo, part, view[lo - base:hi - base])
    return len(window)


@contextmanager
def mapped_file(fd: int, size: int) -> Iterator[np.ndarray]:
    """The first `size` bytes of the open file `fd` (at least that long) as a read-only uint8 array
    over a mapping of it, read whole: asked of the kernel at once (WILLNEED), then each
    `RANGE_BYTES` of it faulted in by a numpy pass that does not hold the GIL, so the caller's
    own passes over it (a crc32c) wait for no disk. The mapping closes on leaving; no view of it
    may be kept."""
    _will_need(fd, 0, size)
    mapped = mmap.mmap(fd, size, prot=mmap.PROT_READ)
    try:
        view = np.frombuffer(mapped, np.uint8)
        for lo in range(0, size, RANGE_BYTES):
            view[lo:lo + RANGE_BYTES:mmap.PAGESIZE].max()  # one byte a page: the pages in, GIL released
        yield view
    finally:
        view = None
        try:
            mapped.close()
        except BufferError:
            pass


def _copied_spans(fd: int, name: str, spans: Sequence[Span], place: Callable[[int, slice, np.ndarray], None],
                  room: int) -> None:
    """`read_file_spans` by copies: each span read into a kept buffer by `os.preadv`,
    `depth_for(spans, room)` at once (one span alone in this thread), and placed from there."""
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
