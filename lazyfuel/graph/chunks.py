"""Chunk arithmetic: where a position falls among chunks, how a strided slice splits over them,
and which source chunks a set of index values hits.

Chunks along one axis are a tuple of extents, as in dask (`(4, 4, 2)`). Everything here is pure
integer arithmetic on those tuples and on index arrays; nothing is lazy and nothing touches dask.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from itertools import accumulate

import numpy as np

Chunks = tuple[tuple[int, ...], ...]


def starts(axis_chunks: tuple[int, ...]) -> tuple[int, ...]:
    """The global position where each chunk begins: `(4, 4, 2)` -> `(0, 4, 8)`."""
    return (0, *accumulate(axis_chunks))[:-1] if axis_chunks else ()


def locate(axis_chunks: tuple[int, ...], position: int) -> tuple[int, int]:
    """`(chunk number, position inside it)` of a global `position` (0 <= position < extent)."""
    begin = starts(axis_chunks)
    block = bisect.bisect_right(begin, position) - 1
    while axis_chunks[block] == 0:  # empty chunks share their start with the next one
        block += 1
    return block, position - begin[block]


def split(extent: int, size: int) -> tuple[int, ...]:
    """`extent` cut into chunks of `size` (the last one shorter); `(0,)` for an empty axis."""
    if extent == 0:
        return (0,)
    size = max(int(size), 1)
    full, rest = divmod(extent, size)
    return (size,) * full + ((rest,) if rest else ())


@dataclass(frozen=True)
class SlicePiece:
    """One output chunk of a strided slice: it comes from one source chunk, sliced locally."""

    block: int
    local: slice


def slice_pieces(axis_chunks: tuple[int, ...], start: int, stop: int, step: int) -> list[SlicePiece]:
    """How `range(start, stop, step)` (already normalised by `slice.indices`) splits over chunks.

    Each source chunk holding some selected positions gives one output chunk, in output order
    (source chunks in reverse for a negative step); the local slice picks the same elements inside
    that chunk, so the output chunk is a numpy view of the source chunk. An empty selection gives
    one empty piece of chunk 0.
    """
    count = len(range(start, stop, step))
    pieces: list[tuple[int, SlicePiece]] = []
    for block, (lo, n) in enumerate(zip(starts(axis_chunks), axis_chunks)):
        k_lo, k_hi = _k_range(lo, lo + n, start, step)
        k_lo, k_hi = max(k_lo, 0), min(k_hi, count)
        if k_hi <= k_lo:
            continue
        first = start + k_lo * step - lo
        end = first + (k_hi - k_lo) * step
        pieces.append((k_lo, SlicePiece(block, slice(first, end if end >= 0 else None, step))))
    if not pieces:
        return [SlicePiece(0, slice(0, 0, 1))]
    return [p for _, p in sorted(pieces, key=lambda kp: kp[0])]


def _k_range(lo: int, hi: int, start: int, step: int) -> tuple[int, int]:
    """The k with lo <= start + k*step < hi, as a half-open range (may be empty)."""
    if step > 0:
        return -((start - lo) // step), -((start - hi) // step)
    s = -step
    return (start - hi) // s + 1, (start - lo) // s + 1


class Axis:
    """One axis's chunks with what lookups need worked out once: where each chunk starts, and
    whether they are regular (all one size but a shorter last one, as dask makes them).

    Building costs O(chunks); after that a lookup costs O(its values) (regular chunks: one
    division per value) or O(values x log chunks), never O(chunks): a select with one index
    block per chunk looks up every block, so anything O(chunks) per lookup is quadratic.
    """

    __slots__ = ("_begin", "_nonempty", "_size", "begin", "extents")

    def __init__(self, extents: tuple[int, ...]) -> None:
        self.extents = tuple(extents)
        self.begin = starts(self.extents)
        self._begin = np.asarray(self.begin, dtype=np.int64)
        size = self.extents[0] if self.extents else 0
        regular = size and all(c == size for c in self.extents[:-1]) and 0 < self.extents[-1] <= size
        self._size = size if regular else 0
        # empty chunks never hold a value: searches look among the nonempty ones only
        self._nonempty = np.flatnonzero(np.asarray(self.extents, dtype=np.int64) > 0)

    def __len__(self) -> int:
        return len(self.extents)

    def slice(self, block: int) -> slice:
        """The global positions of chunk `block`."""
        return slice(self.begin[block], self.begin[block] + self.extents[block])

    def ids(self, values: np.ndarray) -> np.ndarray:
        """The chunk number (int64) each index value falls in (values already range-checked)."""
        if self._size:
            return np.floor_divide(values, self._size, dtype=np.int64)
        found = np.searchsorted(self._begin[self._nonempty], values.astype(np.int64, copy=False),
                                side="right") - 1
        return self._nonempty[found]

    def hits(self, values: np.ndarray) -> tuple[int, ...]:
        """The sorted chunk numbers that `values` touch (the chunks a select must read)."""
        if values.size == 0:
            return ()
        ids = self.ids(values.ravel())
        if ids.size < len(self.extents):  # fewer values than chunks: sort them, no O(chunks) count
            return tuple(int(b) for b in np.unique(ids))
        return tuple(int(b) for b in np.flatnonzero(np.bincount(ids, minlength=len(self.extents))))

    def hit_range(self, bounds: tuple[int, int] | None) -> tuple[int, ...]:
        """Every chunk from the one holding the smallest index value to the one holding the
        largest, given `bounds` = (smallest, largest) of the values (None: no values, no chunks).
        `hits` costs a division and a count per value."""
        if bounds is None:
            return ()
        low, high = self.ids(np.array(bounds, dtype=np.int64))
        return tuple(range(int(low), int(high) + 1))


class Grid:
    """An array's chunks as one `Axis` per dim: a block's slices, shape and number in O(ndim)."""

    __slots__ = ("axes", "chunks", "counts")

    def __init__(self, chunks: Chunks) -> None:
        self.chunks = chunks
        self.axes = tuple(Axis(c) for c in chunks)
        self.counts = tuple(len(c) for c in chunks)

    def slices(self, block: tuple[int, ...]) -> tuple[slice, ...]:
        """The global slices covered by `block`."""
        return tuple(a.slice(b) for a, b in zip(self.axes, block))

    def origin(self, block: tuple[int, ...]) -> tuple[int, ...]:
        """The global position of `block`'s first element."""
        return tuple(a.begin[b] for a, b in zip(self.axes, block))

    def number(self, block: tuple[int, ...]) -> int:
        """`block`'s row-major number."""
        n = 0
        for count, b in zip(self.counts, block):
            n = n * count + b
        return n

    def blocks(self) -> list[tuple[int, ...]]:
        """Every block index, row-major."""
        return [tuple(int(i) for i in b) for b in np.ndindex(*self.counts)]


def chunk_ids(values: np.ndarray, axis_chunks: tuple[int, ...]) -> np.ndarray:
    """`Axis(axis_chunks).ids(values)`: O(chunks) to set up; loops use one `Axis`."""
    return Axis(axis_chunks).ids(values)


def hits(values: np.ndarray, axis_chunks: tuple[int, ...]) -> tuple[int, ...]:
    """`Axis(axis_chunks).hits(values)`: O(chunks) to set up; loops use one `Axis`."""
    return Axis(axis_chunks).hits(values)


def hit_range(bounds: tuple[int, int] | None, axis_chunks: tuple[int, ...]) -> tuple[int, ...]:
    """`Axis(axis_chunks).hit_range(bounds)`: O(chunks) to set up; loops use one `Axis`."""
    return Axis(axis_chunks).hit_range(bounds)


def block_slices(chunks: Chunks, block: tuple[int, ...]) -> tuple[slice, ...]:
    """The global slices covered by `block` of an array chunked as `chunks` (O(chunks): loops
    over blocks use one `Grid`)."""
    return tuple(slice(starts(c)[b], starts(c)[b] + c[b]) for c, b in zip(chunks, block))


def block_shape(chunks: Chunks, block: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of `block` (called per block and argument when lowering: kept to one map)."""
    return tuple(map(tuple.__getitem__, chunks, block))
