"""The workloads `lazyfuel bench` times: one per op, each in numpy, dask and lazyfuel.

A workload is made for a size (bytes of its source table, float32 of 256 columns, chunked in
blocks of about 16 MiB for dask and lazyfuel) from a fixed seed. Each implementation is a
callable that builds its graph and computes it to a numpy array, so graph building (and
lazyfuel's index checks) count in its time, as they do for a user. `bytes_moved` is what the op
must read and write at least: the figure GB/s is computed from, the same for every implementation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import dask.array as da
import numpy as np

import lazyfuel as lf

COLUMNS = 256
CHUNK_BYTES = 16 * 2**20
IMPLEMENTATIONS = ("numpy", "dask", "lazyfuel")


@dataclass(frozen=True)
class Workload:
    """One op at one size: its implementations by name and the bytes it moves."""

    op: str
    size: int
    bytes_moved: int
    runs: dict[str, Callable[[], np.ndarray]]


def _table(size: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    rows = max(1, size // (COLUMNS * 4))
    chunk_rows = max(1, min(rows, CHUNK_BYTES // (COLUMNS * 4)))
    return rng.standard_normal((rows, COLUMNS), dtype=np.float32), chunk_rows


def index_select(size: int, rng: np.random.Generator) -> Workload:
    """Half the rows, sorted random ids (each output block reads a band of the table)."""
    a, c = _table(size, rng)
    idx = np.sort(rng.integers(0, a.shape[0], a.shape[0] // 2)).astype(np.uint32)
    moved = 2 * len(idx) * COLUMNS * 4 + idx.nbytes
    return Workload("index_select", size, moved, {
        "numpy": lambda: np.take(a, idx, axis=0),
        "dask": lambda: da.from_array(a, chunks=(c, COLUMNS))[idx].compute(),
        "lazyfuel": lambda: lf.index_select(lf.from_array(a, chunks=(c, COLUMNS)), 0, idx).compute(),
    })


def gather(size: int, rng: np.random.Generator) -> Workload:
    """64 of the 256 columns per row, picked per row (dim 1)."""
    a, c = _table(size, rng)
    idx = rng.integers(0, COLUMNS, (a.shape[0], 64)).astype(np.uint32)
    moved = 2 * idx.size * 4 + idx.nbytes

    def with_dask() -> np.ndarray:
        x, i = da.from_array(a, chunks=(c, COLUMNS)), da.from_array(idx, chunks=(c, 64))
        return da.map_blocks(np.take_along_axis, x, i, axis=1, dtype=a.dtype, chunks=i.chunks,
                             meta=np.empty((0, 0), a.dtype)).compute()

    return Workload("gather", size, moved, {
        "numpy": lambda: np.take_along_axis(a, idx, axis=1),
        "dask": with_dask,
        "lazyfuel": lambda: lf.gather(lf.from_array(a, chunks=(c, COLUMNS)), 1, idx).compute(),
    })


def masked_fill(size: int, rng: np.random.Generator) -> Workload:
    """Zero where a 10 % mask is true."""
    a, c = _table(size, rng)
    mask = rng.random(a.shape) < 0.1
    moved = 2 * a.nbytes + mask.nbytes
    zero = np.float32(0)
    return Workload("masked_fill", size, moved, {
        "numpy": lambda: np.where(mask, zero, a),
        "dask": lambda: da.where(da.from_array(mask, chunks=(c, COLUMNS)), zero,
                                 da.from_array(a, chunks=(c, COLUMNS))).compute(),
        "lazyfuel": lambda: lf.masked_fill(lf.from_array(a, chunks=(c, COLUMNS)), mask, 0.0).compute(),
    })


def transpose_contiguous(size: int, rng: np.random.Generator) -> Workload:
    """The transpose made contiguous (a Contiguize of a strided view)."""
    a, c = _table(size, rng)
    moved = 2 * a.nbytes

    def with_dask() -> np.ndarray:
        return da.map_blocks(np.ascontiguousarray, da.from_array(a, chunks=(c, COLUMNS)).T).compute()

    return Workload("transpose+contiguous", size, moved, {
        "numpy": lambda: np.ascontiguousarray(a.T),
        "dask": with_dask,
        "lazyfuel": lambda: lf.contiguous(lf.from_array(a, chunks=(c, COLUMNS)).T).compute(),
    })


WORKLOADS: dict[str, Callable[[int, np.random.Generator], Workload]] = {
    "index_select": index_select,
    "gather": gather,
    "masked_fill": masked_fill,
    "transpose+contiguous": transpose_contiguous,
}
