"""Host memory copies into and out of staging, spread over a few threads when they are large.

One thread copies ~8-10 GB/s on the H200's host (pageable numpy memory into page-locked staging),
while 16 threads together copy 35-49 GB/s (benchmarks/probes/link.py). With as many tasks in flight as
cores the tasks' own threads already fill the memory system, but with few tasks (a 4 GiB array
in 1 GiB chunks is 4 tasks; a compute on 4 dask threads) one thread a copy capped the pipeline
at ~8-10 GB/s. `copy(dst, src)` cuts a copy of at least `SPLIT_MIN` bytes into pieces of at
least `PIECE` bytes and copies them on a process-wide pool of `workers()` threads (numpy releases
the GIL while it copies), the caller's thread taking the first piece; smaller copies run in the
caller's thread as before. Pieces of concurrent copies share the pool, so its size bounds the
threads copying at once.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from lazyfuel import prep_gate
from lazyfuel.settings import config

SPLIT_MIN = 32 << 20  # copies under this run in the caller's thread
PIECE = 8 << 20  # the smallest piece a large copy is cut into
RELEASE_MIN = 1 << 20  # copies of this many bytes give up the task's turn (`prep_gate`) first
ENV = "LAZYFUEL_COPY_THREADS"

_pool: ThreadPoolExecutor | None = None
_pool_pid = 0
_lock = threading.Lock()


def workers() -> int:
    """Threads of the copy pool: `lazyfuel.config.copy_threads` (`LAZYFUEL_COPY_THREADS`), else the
    cores (at most 16); 1 copies every piece in the caller's thread."""
    return config.copy_threads or max(1, min(os.cpu_count() or 1, 16))


def _executor() -> ThreadPoolExecutor:
    global _pool, _pool_pid
    with _lock:
        if _pool is None or _pool_pid != os.getpid():  # a forked child makes its own
            _pool = ThreadPoolExecutor(max_workers=workers(), thread_name_prefix="lazyfuel-copy")
            _pool_pid = os.getpid()
        return _pool


def copy(dst: np.ndarray, src: np.ndarray) -> None:
    """`dst[:] = src` for two 1-d uint8 arrays of one length, on several threads when large."""
    n = src.nbytes
    if n >= RELEASE_MIN:
        prep_gate.release()  # numpy copies without the GIL: another task may prepare
    n_workers = workers() if n >= SPLIT_MIN else 1
    if n_workers <= 1:
        dst[:] = src
        return
    piece = max(PIECE, -(-n // n_workers))
    piece = -(-piece // 4096) * 4096  # whole pages: no two threads write one cache line
    bounds = [(start, min(start + piece, n)) for start in range(0, n, piece)]
    pool = _executor()
    futures = [pool.submit(np.copyto, dst[a:b], src[a:b]) for a, b in bounds[1:]]
    a, b = bounds[0]
    dst[a:b] = src[a:b]
    for future in futures:
        future.result()


def gather_rows(src: np.ndarray, rows: np.ndarray, axis: int = 0) -> np.ndarray:
    """`np.take(src, rows, axis)` into a fresh C-contiguous array (a view that is not C-contiguous
    is indexed along `axis` itself, reading only the rows taken); along axis 0, a result of at
    least `SPLIT_MIN` bytes is taken on the copy pool's threads (`take_rows`)."""
    shape = (*src.shape[:axis], len(rows), *src.shape[axis + 1:])
    if not src.flags.c_contiguous:  # np.take would copy such a view whole (a broadcast: terabytes)
        return np.ascontiguousarray(src[(slice(None),) * axis + (rows,)])
    out = np.empty(shape, src.dtype)
    if axis:
        np.take(src, rows, axis=axis, out=out)
        return out
    return take_rows(src, rows, out)


def row_runs(n_rows: int, row_bytes: int, split_min: int = SPLIT_MIN,
             piece: int = PIECE) -> list[tuple[int, int]]:
    """The runs [start, stop) of `n_rows` rows of `row_bytes` that `take_rows` takes on separate
    threads: one where the rows are under `split_min` bytes (or the pool has one thread), else
    at most `workers()` runs, each of at least `piece` bytes (one row at the least)."""
    n_workers = workers() if n_rows * row_bytes >= split_min else 1
    if n_workers <= 1 or not row_bytes or n_rows <= 1:
        return [(0, n_rows)]
    run = max(piece // row_bytes, -(-n_rows // n_workers), 1)
    return [(start, min(start + run, n_rows)) for start in range(0, n_rows, run)]


def take_rows(src: np.ndarray, rows: np.ndarray, out: np.ndarray, mode: str = "raise",
              split_min: int = SPLIT_MIN, piece: int = PIECE) -> np.ndarray:
    """`np.take(src, rows, axis=0, out=out, mode=mode)` for a C-contiguous `src` and `out`; a
    result of at least `split_min` bytes is cut into runs of rows (of at least `piece` bytes)
    taken on the copy pool's threads (numpy's take releases the GIL), the caller's thread taking
    the first run. Returns `out`."""
    bounds = row_runs(len(rows), out.nbytes // max(len(rows), 1), split_min, piece)
    if out.nbytes >= RELEASE_MIN:
        prep_gate.release()
    if len(bounds) <= 1:
        np.take(src, rows, axis=0, out=out, mode=mode)
        return out
    pool = _executor()
    futures = [pool.submit(np.take, src, rows[a:b], 0, out[a:b], mode) for a, b in bounds[1:]]
    a, b = bounds[0]
    np.take(src, rows[a:b], axis=0, out=out[a:b], mode=mode)
    for future in futures:
        future.result()
    return out
