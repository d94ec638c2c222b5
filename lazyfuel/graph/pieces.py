"""Per-source-chunk reads: which rows each source chunk gives each output block of a select.

A select along an axis of several chunks, with concrete indices, can be computed two ways:

- *gathered* (`task.Gathered`): each output block reads the source chunks its indices hit.
  Right when those chunks are views of one buffer (a spanning view, no copy) or when a block hits
  one chunk. Otherwise every hit chunk must stay in memory until every block needing it has run,
  and is concatenated once per block: a random gather from zarr would hold the whole source.
- *pieces* (this module): one read task per source chunk selects, in one program, the rows that
  every output block needs from it (deduplicated and sorted, so reads go forward), and hands them
  out as pieces keyed (source chunk, output block). Each output block concatenates its pieces in
  chunk order and permutes them into place with one more select. Each source chunk is read once
  in total and can be dropped as soon as its read task ends, so memory stays near
  threads x chunk + the pieces in flight + one output block.

`plan_pieces` does the index arithmetic once per select, at lowering time: for index_select the
pieces are rows along `dim`; for gather they are single elements of the raveled chunk (`flat`),
and the output block is a permuted 1-d array reshaped to the block.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from lazyfuel.graph import chunks as ch
from lazyfuel.graph.indices import narrowed
from lazyfuel.graph.ir import Gather, IndexSelect, Node, Select, Source, View

Block = tuple[int, ...]


@dataclass(frozen=True, eq=False)
class PiecePlan:
    """Where every piece of a select comes from and goes to.

    `reads[data_block] = (positions, bounds)`: the read task of that source block selects
    `positions` (along `dim`, or flat element offsets when `flat`; in the kernels' index dtype
    of what they index, `indices.kernel_dtype`) and cuts the result into
    pieces `bounds[j]:bounds[j+1]`. `blocks[out_block] = (pieces, perm, extent)`: the block
    concatenates `pieces` (each `(data_block, j)`) into `extent` rows (elements when `flat`) and
    takes them in the order `perm` (likewise).
    """

    select: Select
    flat: bool
    reads: dict[Block, tuple[np.ndarray, tuple[int, ...]]]
    blocks: dict[Block, tuple[tuple[tuple[Block, int], ...], np.ndarray, int]]


def base_leaf(node: Node) -> Node:
    """`node` below its views."""
    while isinstance(node, View):
        node = node.input
    return node


def wants_pieces(select: Select, leaf: Node) -> bool:
    """Whether `select` (whose source is views of `leaf`) should read per source chunk.

    Yes when its indices are concrete, its axis has several chunks, they are separate buffers
    (not a `from_array` of one numpy array, which `Gathered` spans without a copy) and some
    output block hits more than one of them; and always for a select straight over a zarr
    source, whose read tasks read only the rows they touch (`graph.stored`).
    """
    axis = select.data_axis
    if select.indices.lazy or math.prod(select.shape) == 0:
        return False
    if isinstance(select.data, Source) and select.data.zarr is not None:
        return True
    if len(axis) < 2:
        return False
    if isinstance(leaf, Source) and leaf.one_buffer:
        return False
    # a block hits several chunks exactly when its lowest and highest values lie in different ones
    chunks = select.index_chunks
    return any(len(axis.hit_range(select.indices.block_range(chunks, b))) > 1
               for b in select.index_grid.blocks())


def _index_blocks(select: Select) -> list[tuple[Block, np.ndarray]]:
    """(block of the index array, its checked values) for every index block of a select."""
    grid = select.index_grid
    return [(b, select.indices.values[grid.slices(b)]) for b in grid.blocks()]


def plan_pieces(select: Select) -> PiecePlan:
    """The pieces of `select` (an IndexSelect or Gather with concrete indices)."""
    if isinstance(select, IndexSelect):
        return _plan_rows(select)
    if isinstance(select, Gather):
        return _plan_elements(select)
    raise TypeError(f"no pieces for a {type(select).__name__}")


def _plan_rows(select: IndexSelect) -> PiecePlan:
    """index_select: pieces are rows along `dim`, shared by every block of the other axes."""
    d, axis = select.dim, select.data_axis
    begin = np.asarray(axis.begin, dtype=np.int64)
    rows: dict[int, list[tuple[int, np.ndarray]]] = defaultdict(list)  # chunk -> [(out block, rows)]
    per_block: dict[int, tuple[list[tuple[int, int]], np.ndarray, int]] = {}
    for (k,), values in _index_blocks(select):
        if values.size == 0:
            continue
        unique, inverse = np.unique(values, return_inverse=True)  # sorted: grouped by chunk
        chunk_of = axis.ids(unique)
        hit, first = np.unique(chunk_of, return_index=True)
        ends = [*first[1:], unique.size]
        used = []
        for c, lo, hi in zip(hit.tolist(), first.tolist(), ends):
            used.append((c, len(rows[c])))
            rows[c].append((k, unique[lo:hi].astype(np.int64) - begin[c]))
        per_block[k] = (used, narrowed(inverse.reshape(-1), unique.size), int(unique.size))
    others = [range(len(c)) for a, c in enumerate(select.data.chunks) if a != d]
    reads, blocks = {}, {}
    for o in (tuple(int(i) for i in b) for b in np.ndindex(*(len(r) for r in others))):
        for c, got in rows.items():
            reads[(*o[:d], c, *o[d:])] = _concat([r for _, r in got], axis.extents[c])
        for k, (used, perm, extent) in per_block.items():
            pieces = tuple(((*o[:d], c, *o[d:]), j) for c, j in used)
            blocks[(*o[:d], k, *o[d:])] = (pieces, perm, extent)
    return PiecePlan(select, False, reads, blocks)


def _plan_elements(select: Gather) -> PiecePlan:
    """gather: pieces are elements of the raveled source chunk, per output block."""
    d, data, axis = select.dim, select.data, select.data_axis
    axis_chunks = axis.extents
    begin = np.asarray(axis.begin, dtype=np.int64)
    flats: dict[Block, list[np.ndarray]] = defaultdict(list)  # data block -> positions per piece
    blocks = {}
    for b, values in _index_blocks(select):
        if values.size == 0:
            continue
        shape = values.shape
        outer, inner = math.prod(shape[:d]), math.prod(shape[d + 1:])
        grid = (outer, shape[d], inner)
        outer_at = np.arange(outer, dtype=np.int64)[:, None, None]
        inner_at = np.arange(inner, dtype=np.int64)[None, None, :]
        chunk_of = axis.ids(values.reshape(-1)).reshape(grid)
        local = values.reshape(grid).astype(np.int64) - begin[chunk_of]
        extent = np.asarray(axis_chunks, dtype=np.int64)[chunk_of]
        flat = (outer_at * extent + local) * inner + inner_at
        stride = outer * max(axis_chunks) * inner
        unique, inverse = np.unique(chunk_of * stride + flat, return_inverse=True)
        chunk_u = unique // stride
        hit, first = np.unique(chunk_u, return_index=True)
        ends = [*first[1:], unique.size]
        used = []
        for c, lo, hi in zip(hit.tolist(), first.tolist(), ends):
            source = (*b[:d], c, *b[d + 1:])
            used.append((source, len(flats[source])))
            flats[source].append(unique[lo:hi] - c * stride)
        blocks[b] = (tuple(used), narrowed(inverse.reshape(-1), unique.size), int(unique.size))
    reads = {s: _concat(got, math.prod(ch.block_shape(data.chunks, s))) for s, got in flats.items()}
    return PiecePlan(select, True, reads, blocks)


def _concat(pieces: list[np.ndarray], extent: int) -> tuple[np.ndarray, tuple[int, ...]]:
    """The pieces' positions (into an axis of `extent`) end to end, in the kernels' index dtype,
    and where each piece starts and ends."""
    bounds = np.concatenate(([0], np.cumsum([p.size for p in pieces]))).astype(int)
    return narrowed(np.concatenate(pieces), extent), tuple(bounds.tolist())
