"""Small blocks grouped into larger tasks: the same graph with coarser chunks, for `lower_into`.

Each task of a compute pays a fixed cost besides its bytes: the Python that builds its inputs,
plans and records its program (a millisecond or so under the GIL), a submit and a fence. At
16 MiB blocks that cost, not the link or the kernels, sets the speed. A compute on dask's local
schedulers writes every block into one result array (`lower_into`), so nothing outside lazyfuel
sees its blocks: there the graph may be lowered with coarser chunks, k adjacent blocks of the
user's per task, one program each. The user's Array keeps its chunks; `to_dask`, `persist` and
distributed computes (whose dask blocks are the output's chunks) keep one task per block.

`grouped(root, target, min_tasks)` rebuilds `root` with adjacent blocks merged, the last axis
first (so a task's region of the result stays whole rows where it can), until a block holds about
`target` bytes, keeping at least `min_tasks` tasks (so every worker thread has work). Only graphs
whose every node can be rebuilt with other chunks without reading data are grouped: sources that
are views of one host numpy array (`Source.host`), rechunks (dask's, to the new chunks), slices,
broadcasts, transposes, contiguize, masked_fill, and index_select / gather with concrete indices
(their (min, max) per block merged, not re-read). Where some node's chunks would have to change
and it is anything else (dask or zarr sources, blocks in device memory, FFTs, lazy indices), the
graph keeps its chunks.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import dask
import dask.local
import dask.system

from lazyfuel.graph import chunks as ch
from lazyfuel.graph.fuse import topological
from lazyfuel.graph.ir import (
    Broadcast,
    Contiguize,
    Gather,
    IndexSelect,
    Indices,
    MaskedFill,
    Node,
    Rechunk,
    Select,
    Slice,
    Source,
    Transpose,
)


class _Ungroupable(Exception):
    """A node that cannot be rebuilt with other chunks (the graph keeps its own)."""


def grouped(root: Node, target: int, min_tasks: int) -> Node:
    """`root` with adjacent blocks merged into blocks of about `target` bytes (see the module
    docstring), or `root` itself where its blocks are large enough already, where merging would
    leave fewer than `min_tasks` tasks, or where some node below it cannot be regrouped.

    A task is sized by the largest block of any node it reads or makes, not by its result alone:
    a select of a few columns of wide rows reads far more than it writes, and merging its blocks
    merges its source's blocks as much."""
    heaviest = max(_largest_block(n) for n in topological(root))
    result = _largest_block(root)
    per_element = root.dtype.itemsize * (heaviest / result if result else 1.0)
    wanted = coarse_chunks(root.chunks, per_element, target, min_tasks)
    if wanted == root.chunks:
        return root
    try:
        return _Regrouping().node(root, wanted)
    except _Ungroupable:
        return root


def local_workers(scheduler: Any, dask_kwargs: dict[str, Any]) -> int:
    """How many threads dask's local `scheduler` runs tasks on: 1 for the synchronous one, else
    `num_workers` as dask reads it (the keyword, dask's config, then the CPUs)."""
    if scheduler is dask.local.get_sync:
        return 1
    given = dask_kwargs.get("num_workers") or dask.config.get("num_workers", None)
    return max(int(given or dask.system.CPU_COUNT), 1)


def described(root: Node, target: int, workers: int) -> str | None:
    """What `grouped` does to `root` for `lf.explain`, in one line (None: nothing)."""
    found = grouped(root, target, 2 * workers) if target else root
    if found is root:
        return None
    before, after = math.prod(len(c) for c in root.chunks), math.prod(len(c) for c in found.chunks)
    return (f"  compute() on dask's local schedulers runs this node's {before} blocks as {after} task(s) "
            f"of up to {-(-before // after)} adjacent blocks (task_bytes {target}, at least two tasks "
            f"for each of {workers} threads); to_dask() and persist() keep one task per block")


def _largest_block(node: Node) -> int:
    """Bytes of `node`'s largest block."""
    return node.dtype.itemsize * math.prod(max(c, default=0) for c in node.chunks)


def coarse_chunks(chunks: ch.Chunks, itemsize: float, target: int, min_tasks: int) -> ch.Chunks:
    """`chunks` with runs of adjacent chunks merged, the last axis first: along each axis
    `round(target / block bytes)` chunks become one (block bytes: the largest block's elements
    times `itemsize`, the bytes a task moves per element of its result), at most as many as
    keeps `min_tasks` blocks; the next axis only once this one is one chunk."""
    if not all(isinstance(n, int) for c in chunks for n in c):  # unknown (NaN) sizes: as they are
        return chunks
    merged = list(chunks)
    for axis in reversed(range(len(merged))):
        block = itemsize * math.prod(max(c, default=0) for c in merged)
        if block == 0:
            break
        count = len(merged[axis])
        if count == 1:
            continue
        others = math.prod(len(c) for i, c in enumerate(merged) if i != axis)
        most = count * others // max(min_tasks, 1)  # the largest factor keeping min_tasks blocks
        factor = min(int(target / block + 0.5), most, count)
        if factor < 2:
            break
        merged[axis] = merge(merged[axis], factor)
        if len(merged[axis]) > 1:
            break
    return tuple(merged)


def merge(axis_chunks: tuple[int, ...], factor: int) -> tuple[int, ...]:
    """Every `factor` consecutive chunks as one (the last group may hold fewer)."""
    return tuple(sum(axis_chunks[i:i + factor]) for i in range(0, len(axis_chunks), factor))


class _Regrouping:
    """Rebuilds nodes with wanted chunks, each (node, chunks) once, so a node two consumers share
    stays one node."""

    def __init__(self) -> None:
        self.done: dict[tuple[str, ch.Chunks], Node] = {}

    def node(self, node: Node, chunks: ch.Chunks) -> Node:
        if node.chunks == chunks:
            return node
        key = (node.name, chunks)
        found = self.done.get(key)
        if found is None:
            found = self.done[key] = self._rebuilt(node, chunks)
            if found.chunks != chunks:
                raise _Ungroupable(node.label)
        return found

    def _rebuilt(self, node: Node, chunks: ch.Chunks) -> Node:
        if isinstance(node, Source) and node.host is not None:
            from lazyfuel.graph.sources import numpy_source  # sources lower through lower.py

            return replace(node, array=numpy_source(node.host, chunks))
        if isinstance(node, Broadcast):
            lead = len(node.target) - node.input.ndim
            inner = tuple(chunks[lead + i] if have == want else node.input.chunks[i]
                          for i, (have, want) in enumerate(zip(node.input.shape, node.target[lead:])))
            return replace(node, input=self.node(node.input, inner), out_chunks=chunks)
        if isinstance(node, Transpose):
            inner = [()] * node.ndim
            for out_axis, in_axis in enumerate(node.axes):
                inner[in_axis] = chunks[out_axis]
            return replace(node, input=self.node(node.input, tuple(inner)))
        if isinstance(node, Rechunk):  # dask's rechunk makes any chunks of its input
            return replace(node, new_chunks=chunks)
        if isinstance(node, Slice):
            return replace(node, input=self.node(node.input, _slice_input_chunks(node, chunks)))
        if type(node) is Contiguize:
            return replace(node, input=self.node(node.input, chunks))
        if isinstance(node, MaskedFill):
            return replace(node, data=self.node(node.data, chunks), mask=self.node(node.mask, chunks))
        if isinstance(node, (IndexSelect, Gather)) and not node.indices.lazy:
            return self._select(node, chunks)
        raise _Ungroupable(node.label)

    def _select(self, node: Select, chunks: ch.Chunks) -> Node:
        """The select with output `chunks`: its source keeps its chunks along `dim` (a block reads
        the source chunks its indices hit) and takes `chunks` on the other axes."""
        d = node.dim
        if isinstance(node, Gather) and node.data.ndim != len(chunks):
            raise _Ungroupable(node.label)
        inner = []
        for axis, want in enumerate(chunks):
            if axis == d:
                inner.append(node.data.chunks[d])
            elif isinstance(node, Gather) and node.shape[axis] != node.data.shape[axis]:
                inner.append(node.data.chunks[axis])  # a gather's narrower axis: one output chunk
            else:
                inner.append(want)
        data = self.node(node.data, tuple(inner))
        index_chunks = (chunks[d],) if isinstance(node, IndexSelect) else chunks
        return replace(node, data=data, indices=regrouped(node.indices, index_chunks), out_chunks=chunks)


def _slice_input_chunks(node: Slice, chunks: ch.Chunks) -> ch.Chunks:
    """The input chunks under which `node` (a basic-indexing view) has output `chunks` (merges of
    its own): each output chunk comes from one input block, so a run of output chunks merged is
    the run of input blocks they come from (with the blocks between, which the step skips)
    merged; axes an int picks from keep their chunks. `_Regrouping.node` checks the result."""
    out_axis = 0
    inner = []
    for axis, key in enumerate(node.key):
        own = node.input.chunks[axis]
        if not isinstance(key, slice):
            inner.append(own)
            continue
        fine, pieces = node.chunks[out_axis], node._pieces[axis]
        group: dict[int, int] = {}  # input block -> the merged output chunk it feeds
        first = 0
        for number, extent in enumerate(chunks[out_axis]):
            last, total = first, fine[first]
            while total < extent:
                last += 1
                total += fine[last]
            low, high = sorted((pieces[first].block, pieces[last].block))
            group.update((b, number) for b in range(low, high + 1))
            first = last + 1
        merged: list[int] = []
        previous = None
        for b, extent in enumerate(own):
            mine = group.get(b)
            if mine is not None and mine == previous:
                merged[-1] += extent
            else:
                merged.append(extent)
            previous = mine
        inner.append(tuple(merged))
        out_axis += 1
    return tuple(inner)


def regrouped(indices: Indices, chunks: ch.Chunks) -> Indices:
    """Concrete `indices` read in `chunks` (merges of the chunks they were checked in): the same
    snapshot, with each new block's (min, max) merged from the old blocks' ranges."""
    old = ch.Grid(indices.chunks)
    new = ch.Grid(chunks)
    # along each axis, the old blocks each new block covers (boundaries line up: a merge)
    spans = []
    for old_axis, new_axis in zip(old.axes, new.axes):
        bounds = {b: i for i, b in enumerate(old_axis.begin)}
        firsts = [bounds.get(b) for b in new_axis.begin]
        if None in firsts:
            raise _Ungroupable("indices")
        spans.append([range(f, n) for f, n in zip(firsts, [*firsts[1:], len(old_axis)])])
    if not indices.ranges:
        return Indices(indices.axis_len, values=indices.values, chunks=chunks)
    ranges = []
    for block in new.blocks():
        lows, highs = [], []
        for old_block in _product([spans[a][b] for a, b in enumerate(block)]):
            found = indices.ranges[old.number(old_block)]
            if found is not None:
                lows.append(found[0])
                highs.append(found[1])
        ranges.append((min(lows), max(highs)) if lows else None)
    made = Indices(indices.axis_len, values=indices.values, chunks=chunks, ranges=tuple(ranges))
    made.__dict__["grid"] = new  # the cached_property, already built
    return made


def _product(axes: list[range]) -> list[tuple[int, ...]]:
    """Every combination of one position per axis, row-major."""
    found: list[tuple[int, ...]] = [()]
    for positions in axes:
        found = [(*f, p) for f in found for p in positions]
    return found
