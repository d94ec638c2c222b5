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


def chunk_ids(values: np.ndarray, axis_chunks: tuple[int, ...]) -> np.ndarray:
    """The chunk number (int64) each index value falls in (values already range-checked).

    Regular chunks (all one size but a shorter last one, as dask makes them) take one integer
    division; others a binary search.
    """
    size = axis_chunks[0] if axis_chunks else 0
    if size and all(c == size for c in axis_chunks[:-1]) and 0 < axis_chunks[-1] <= size:
        return np.floor_divide(values, size, dtype=np.int64)
    begin = np.asarray(starts(axis_chunks), dtype=np.int64)
    nonempty = np.asarray(axis_chunks) > 0
    # Empty chunks never hold a value: search among the nonempty ones only.
    keep = np.flatnonzero(nonempty)
    found = np.searchsorted(begin[keep], values.astype(np.int64, copy=False), side="right") - 1
    return keep[found]


def hits(values: np.ndarray, axis_chunks: tuple[int, ...]) -> tuple[int, ...]:
    """The sorted chunk numbers that `values` touch (the chunks a select must read)."""
    if values.size == 0:
        return ()
    counts = np.bincount(chunk_ids(values.ravel(), axis_chunks), minlength=len(axis_chunks))
    return tuple(int(b) for b in np.flatnonzero(counts))


def hit_range(bounds: tuple[int, int] | None, axis_chunks: tuple[int, ...]) -> tuple[int, ...]:
    """Every chunk from the one holding the smallest index value to the one holding the largest,
    given `bounds` = (smallest, largest) of the values (None: no values, no chunks). `hits` costs a
    division and a count per value."""
    if bounds is None:
        return ()
    low, high = chunk_ids(np.array(bounds, dtype=np.int64), axis_chunks)
    return tuple(range(int(low), int(high) + 1))


def block_slices(chunks: Chunks, block: tuple[int, ...]) -> tuple[slice, ...]:
    """The global slices covered by `block` of an array chunked as `chunks`."""
    return tuple(slice(starts(c)[b], starts(c)[b] + c[b]) for c, b in zip(chunks, block))


def block_shape(chunks: Chunks, block: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of `block`."""
    return tuple(c[b] for c, b in zip(chunks, block))
