"""Reading a select's rows straight from a zarr store: only what the indices touch.

A select read per source chunk (`graph.pieces`) over a `from_zarr` source does not load whole
chunks through dask: each read task (`StoredReader`, one per touched source block) asks the store
for the rows its block gives, once each however many output blocks (or repeated indices) want
them, in ascending order:

- a chunk stored as its raw bytes (zarr v2 without compressor or filters in C order, v3 with the
  `bytes` codec alone), selected along its first axis: only the byte ranges of the touched rows,
  neighbouring ranges merged when the gap between them is under `GAP_BYTES` (one read beats many
  small ones), all ranges of the task requested at once through zarr's async store API;
- anything else (compressed chunks, sharded stores, other axes): zarr's orthogonal selection of
  the rows in the block's region, which decodes each touched chunk once (a sharded store: only
  the touched inner chunks, zarr's partial decode) and keeps only the rows.

Read tasks run on dask's worker threads, so chunks decode in parallel (numcodecs' zstd and blosc
release the GIL). `BUDGET` bounds the chunk bytes the read tasks of one process hold at once
(`OOC_BYTES_IN_FLIGHT`): a task waits for its share before reading.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from lazyfuel.graph import chunks as ch

OOC_BYTES_IN_FLIGHT = 512 * 2**20
"""Chunk bytes the read tasks of one process may hold at once (later a `lazyfuel.config` knob)."""

GAP_BYTES = 256 * 2**10
"""Two touched byte ranges of a raw chunk closer than this are read as one."""

RANGE_BYTES = 16 * 2**20
"""The longest single read of a raw chunk (merged ranges are cut there)."""


class ByteBudget:
    """A count of bytes that threads take before holding chunk data and give back after."""

    def __init__(self, limit: int) -> None:
        self.limit, self.held = int(limit), 0
        self._changed = threading.Condition()

    def take(self, nbytes: int) -> int:
        """Wait until `nbytes` (at most the whole budget) fit, take them; what was taken."""
        nbytes = max(0, min(int(nbytes), self.limit))
        with self._changed:
            self._changed.wait_for(lambda: self.held + nbytes <= self.limit)
            self.held += nbytes
        return nbytes

    def give(self, nbytes: int) -> None:
        """Give back bytes `take` returned."""
        with self._changed:
            self.held -= nbytes
            self._changed.notify_all()


BUDGET = ByteBudget(OOC_BYTES_IN_FLIGHT)


def raw_dtype(arr: Any) -> np.dtype | None:
    """The dtype of a zarr array's chunk bytes (byte order included) when each chunk is stored as
    its raw C-order bytes; None otherwise (compressed, filtered, sharded, F order)."""
    meta = arr.metadata
    dtype = np.dtype(arr.dtype)
    if meta.zarr_format == 2:
        raw = meta.compressor is None and not meta.filters and meta.order == "C"
        return dtype if raw else None
    from zarr.codecs import BytesCodec

    codecs = tuple(meta.codecs)
    if len(codecs) != 1 or not isinstance(codecs[0], BytesCodec):
        return None
    endian = getattr(codecs[0].endian, "value", codecs[0].endian)
    return dtype if endian is None else dtype.newbyteorder("<" if endian == "little" else ">")


def regular_chunks(arr: Any) -> tuple[int, ...]:
    """The chunk shape a source over `arr` is cut into: the shards of a sharded array (its inner
    chunks are read through zarr's partial decode), else its chunks."""
    return tuple(getattr(arr, "shards", None) or arr.chunks)


@dataclass(frozen=True, eq=False)
class StoredReader:
    """One read task of a select over a zarr source (the counterpart of `task.Reader`).

    `region` is the source block in the array (slices); `positions` (U32) the rows along `axis`,
    local to the block, that every output block needs from it, piece j being
    `positions[bounds[j]:bounds[j + 1]]`. `chunk` is the zarr chunk the block is (its coordinates)
    when the block is exactly one chunk, else None. `block` numbers the task (unused: no device).
    """

    zarr: Any  # the zarr.Array
    region: tuple[slice, ...]
    chunk: tuple[int, ...] | None
    positions: np.ndarray
    bounds: tuple[int, ...]
    axis: int
    block: int = 0


def read_stored(reader: StoredReader, runtime: Any = None) -> tuple[np.ndarray, ...]:
    """The read task: the block's touched rows, each read once, cut into the pieces."""
    if len(reader.bounds) < 2:
        return ()
    positions = reader.positions
    lead = (slice(None),) * reader.axis
    if positions.size < 2 or bool(np.all(positions[1:] > positions[:-1])):  # pieces are views
        data = _native(read_rows(reader, positions.astype(np.int64)))
        return tuple(data[(*lead, slice(lo, hi))] for lo, hi in pairwise(reader.bounds))
    rows, inverse = np.unique(positions, return_inverse=True)
    data = _native(read_rows(reader, rows.astype(np.int64)))
    return tuple(np.take(data, inverse[lo:hi], axis=reader.axis) for lo, hi in pairwise(reader.bounds))


def read_rows(reader: StoredReader, rows: np.ndarray) -> np.ndarray:
    """Rows `rows` (ascending, unique, local to the block) along `reader.axis` of its region."""
    arr, region, axis = reader.zarr, reader.region, reader.axis
    shape = [s.stop - s.start for s in region]
    shape[axis] = rows.size
    dtype = raw_dtype(arr) if axis == 0 and reader.chunk is not None else None
    if dtype is not None:
        return _raw_rows(arr, reader.chunk, rows, tuple(shape), dtype)
    nbytes = math.prod(s.stop - s.start for s in region) * np.dtype(arr.dtype).itemsize
    taken = BUDGET.take(nbytes)  # zarr decodes whole (inner) chunks
    try:
        selection = list(region)
        selection[axis] = rows + region[axis].start
        return np.asarray(arr.get_orthogonal_selection(tuple(selection)))
    finally:
        BUDGET.give(taken)


def _native(a: np.ndarray) -> np.ndarray:
    """`a` in native byte order (the source's chunks are, `ops.native_chunks`)."""
    return a if a.dtype.isnative else a.astype(a.dtype.newbyteorder("="))


def _raw_rows(arr: Any, chunk: tuple[int, ...], rows: np.ndarray, shape: tuple[int, ...],
              dtype: np.dtype) -> np.ndarray:
    """Rows of a raw chunk read as byte ranges; a chunk not stored reads as the fill value."""
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    full = tuple(arr.chunks[1:])  # stored chunks are whole (edge chunks padded)
    trim = (slice(None), *(slice(0, n) for n in shape[1:]))
    row_bytes = math.prod(full) * dtype.itemsize
    spans = coalesced(rows, row_bytes)
    store_path = arr.async_array.store_path / arr.metadata.encode_chunk_key(chunk)
    out = np.empty(shape, dtype)
    taken = BUDGET.take(sum(hi - lo for lo, hi, _ in spans) * row_bytes)
    try:
        ranges = [(lo * row_bytes, hi * row_bytes) for lo, hi, _ in spans]
        got = sync(_read_ranges(store_path, default_buffer_prototype(), ranges))
        if all(b is None for b in got):
            out[...] = arr.fill_value
            return out
        if any(b is None for b in got):
            raise OSError(f"zarr chunk {store_path} vanished while it was read")
        done = 0
        for (lo, _, picked), buf in zip(spans, got):
            stored = buf.as_numpy_array().view(dtype).reshape(-1, *full)
            out[done:done + picked.size] = stored[picked - lo][trim]
            done += picked.size
    finally:
        BUDGET.give(taken)
    return out


def coalesced(rows: np.ndarray, row_bytes: int) -> list[tuple[int, int, np.ndarray]]:
    """Ascending unique `rows` as spans `(first row, end row, rows in it)` to read whole: rows
    whose gap is under `GAP_BYTES` share a span, and no span is longer than `RANGE_BYTES`."""
    gap_rows = max(1, GAP_BYTES // max(row_bytes, 1))
    most = max(1, RANGE_BYTES // max(row_bytes, 1))
    breaks = np.flatnonzero(np.diff(rows) > gap_rows) + 1
    spans = []
    for part in np.split(rows, breaks):
        lo = 0
        while lo < part.size:  # cut long spans at RANGE_BYTES
            hi = int(np.searchsorted(part, part[lo] + most, side="left"))
            spans.append((int(part[lo]), int(part[hi - 1]) + 1, part[lo:hi]))
            lo = hi
    return spans


async def _read_ranges(store_path: Any, prototype: Any, ranges: Sequence[tuple[int, int]]) -> list[Any]:
    """The byte ranges of one stored chunk, requested at once."""
    from zarr.abc.store import RangeByteRequest

    return list(await asyncio.gather(*(store_path.get(prototype, RangeByteRequest(lo, hi))
                                       for lo, hi in ranges)))


def chunk_of(arr: Any, source_chunks: ch.Chunks, block: tuple[int, ...]) -> tuple[int, ...] | None:
    """The zarr chunk coordinates of dask block `block` when the source is cut exactly into the
    array's chunks (then block and chunk coincide), else None."""
    for axis_chunks, size in zip(source_chunks, arr.chunks):
        if any(c != size for c in axis_chunks[:-1]) or axis_chunks[-1] > size:
            return None
    return block
