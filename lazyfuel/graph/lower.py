"""Lowering: lazyfuel's graph to a dask array, one HighLevelGraph layer per fused group.

Every fused group maps output blocks to leaf chunks in its own way (views permute, pick and
broadcast blocks; a select reads the chunks its indices hit), so each group becomes one
`HighLevelGraph` layer of `run_block` tasks whose dependencies are exactly the chunks they read.
Sources stay the dask arrays they are, and rechunks are dask's own. The result is an ordinary
`dask.array.Array` built with `meta=` and `dtype=` given, in dask's legacy mode through its public
constructor and in the array-expression mode through `from_graph` (the only way that mode takes a
hand-made graph), so both modes work. A select read per source chunk (`graph.pieces`) adds a
layer of read tasks, one per source chunk, between the chunks and the group that uses them.
Each task's recipe carries its block's number (row-major), from which the task picks its device.
Groups are cut where ops prefer different backends (`graph.family`): each group is one program on
one backend, and a result crossing to another backend's group moves as a numpy chunk, or as a
`crossing.DeviceChunk` where `crossing.may_hand_over` marks the producer's tasks (`export`): that
variant of the producer gets dask keys of its own, so no other reader of it ever sees one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from functools import partial
from typing import Any

import dask.array as da
import numpy as np
from dask.array.optimization import optimize
from dask.base import tokenize
from dask.core import flatten as core_flatten
from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

from lazyfuel.backends import base
from lazyfuel.graph import crossing
from lazyfuel.graph.batched import batched_layer
from lazyfuel.graph.family import Families
from lazyfuel.graph.fuse import Key, Partition, Task, read_tasks, recipe, topological
from lazyfuel.graph.grouping import grouped
from lazyfuel.graph.ir import Node, Rechunk, Source
from lazyfuel.graph.stored import StoredReader, direct_reads, read_stored
from lazyfuel.graph.task import BlockRecipe, Runtime, read_pieces, run_block, spanned, store_block, store_made
from lazyfuel.settings import config


def lower(root: Node, runtime: Runtime) -> da.Array:
    """The dask array computing `root`; nothing runs."""
    prefer = Families(runtime.planner)
    return _Lowering(Partition.of(root, prefer), runtime, prefer).array(root)


class _Lowering:
    """Lowers the nodes of one graph, each once (memoized by name)."""

    def __init__(self, partition: Partition, runtime: Runtime, prefer: Families,
                 local: bool = False) -> None:
        self.partition, self.runtime, self.prefer = partition, runtime, prefer
        self.local = local  # a graph for this process's schedulers: chunks given as they are
        self.workers: int | None = None  # the threads of those schedulers, where known
        self.done: dict[tuple[str, bool], da.Array] = {}

    def array(self, node: Node, handover: bool = False) -> da.Array:
        """`node`'s dask array; `handover`: its tasks may return device chunks (`graph.crossing`)."""
        found = self.done.get((node.name, handover))
        if found is None:
            found = self.done[(node.name, handover)] = self._lower(node, handover)
        return found

    def _lower(self, node: Node, handover: bool) -> da.Array:
        if isinstance(node, Source):
            return node.array
        if isinstance(node, Rechunk):
            return self.array(node.input).rechunk(node.chunks)
        name, layer, deps, reads = self.group(node, handover=handover)
        return from_layer(name, layer, deps, node.chunks, node.dtype, reads)

    def _hands_over(self, leaf: Node, node: Node) -> bool:
        """Whether `leaf`, a group read by `node`'s group, may hand over device chunks."""
        return (not isinstance(leaf, (Source, Rechunk))
                and crossing.may_hand_over(self.prefer.of_group(leaf), self.prefer.of_group(node)))

    def group(self, node: Node, into: np.ndarray | None = None, handover: bool = False
              ) -> tuple[str, dict, list[da.Array], dict[str, dict]]:
        """The layer of `node`'s fused group (`run_block` tasks; `store_block` tasks writing into
        `into` when given; tasks that may return device chunks with `handover`), the dask arrays
        it reads, and its layers of read tasks."""
        leaves = self.partition.rooted_at(node).leaves(node)
        deps = {leaf.name: self.array(leaf, self._hands_over(leaf, node)) for leaf in leaves}
        keys = {name: arr.__dask_keys__() for name, arr in deps.items()}
        held = {name: _held_chunks(arr) for name, arr in deps.items()} if self.local else {}
        kind = node.label if into is None else f"{node.label}-into"
        kind += "-handover" if handover else ""
        name = f"lazyfuel-{kind}-{tokenize(node.name, self.runtime)}"
        layer: dict = {}
        reads: dict[str, dict] = {}  # layers of read tasks (selects read per source chunk)

        def chunk(key: Key) -> Any:
            """A leaf chunk's dask key, or the chunk itself where it is held."""
            found = _key(keys[key[0]], key[1:])
            chunks = held.get(key[0])
            return found if chunks is None else _chunks_of(found, chunks)

        def arg(key: Key) -> Any:
            if isinstance(key[0], tuple):  # a read task's result: ("pieces", select name)
                return (self._reads(key[0][1], chunk, reads), *key[1:])
            return chunk(key)

        spans: dict = {}
        starts = [np.concatenate(([0], np.cumsum(c))).tolist() for c in node.chunks]
        if into is not None and held and all(h is not None for h in held.values()) \
                and not self.partition.pieces:
            # Nothing to wait for: each task makes its own recipe, on the worker thread, while
            # other tasks' kernels run (lowering then costs next to nothing up front).
            for number, block in enumerate(node.blocks()):
                region = tuple(slice(s[i], s[i + 1]) for s, i in zip(starts, block))
                made = partial(self._held_task, node, block, number, handover, arg, spans)
                layer[(name, *block)] = (store_made, made, self.runtime, into, region)
            return name, layer, [], reads
        entries, regions = [], []
        for number, (block, task) in enumerate(tasks(self.partition, node)):
            body = replace(task.recipe, block=number, export=handover)
            args = [arg(k) for k in task.keys]
            if self.local:
                body = spanned(body, args, spans)
            entries.append((block, body, args))
            if into is None:
                layer[(name, *block)] = (run_block, body, self.runtime, *args)
            else:
                region = tuple(slice(s[i], s[i + 1]) for s, i in zip(starts, block))
                regions.append(region)
                layer[(name, *block)] = (store_block, body, self.runtime, into, region, *args)
        if not handover and (config._resident or (into is not None and _reads_device_blocks(deps.values()))):
            # several blocks per task and per command buffer (`graph.batched`)
            block_bytes = max(math.prod(max(c) for c in node.chunks), 1) * node.dtype.itemsize
            layer = batched_layer(name, entries, self.runtime, block_bytes,
                                  None if into is None else (into, regions), self.workers) or layer
        kept = [arr for n, arr in deps.items() if held.get(n) is None]
        return name, layer, kept, reads

    def _held_task(self, node: Node, block: tuple[int, ...], number: int, handover: bool,
                   arg: Callable[[Key], Any], spans: dict) -> tuple[BlockRecipe, list[Any]]:
        """The recipe of `block` of `node` and its arguments, the held chunks it reads."""
        task = recipe(self.partition, node, block)
        args = [arg(k) for k in task.keys]
        body = replace(task.recipe, block=number, export=handover)
        return spanned(body, args, spans), args

    def _reads(self, select: str, chunk: Callable[[Key], Any], reads: dict[str, dict]) -> str:
        """The name of `select`'s layer of read tasks, added to `reads` on first use."""
        name = f"lazyfuel-read-{tokenize(select, self.runtime)}"
        if name not in reads:
            found = read_tasks(self.partition, self.partition.pieces[select])
            reads[name] = {(name, *block): (read_stored if isinstance(reader, StoredReader) else read_pieces,
                                            replace(reader, block=number), self.runtime,
                                            *map(chunk, chunk_keys))
                           for number, (block, reader, chunk_keys) in enumerate(found)}
        return name


def lower_into(root: Node, runtime: Runtime, into: np.ndarray, workers: int = 1) -> tuple[dict, list] | None:
    """A task graph (a plain dict, ready for dask's local schedulers) and its keys that compute
    `root` straight into `into` (an array of `root`'s shape and dtype), each block written by the
    task that makes it; None when `root` is not a fused group (a source or a rechunk: nothing of
    lazyfuel's to run).

    Chunks the graph already holds (a `from_array` of a numpy array: views of it) are handed to
    the tasks as they are, not as keys: the scheduler has no source tasks to run, and views of one
    buffer that a select reads together are spanned once here (`task.spanned`), not in every task.
    When a group reads held chunks only, each task makes its own recipe when it runs, on the
    worker thread, while other tasks' kernels run: lowering then costs next to nothing before the
    first kernel starts. The graph goes through dask's array optimisation (culling the chunks no
    task reads, fusing a source's getters) unless every source in it is a numpy array's chunks
    (`Source.one_buffer`): there is nothing to cull or fuse then, and skipping it saves thousands
    of Python calls per compute.

    Small blocks are grouped (`graph.grouping`): the graph is lowered with adjacent blocks merged
    into tasks of about `lazyfuel.config.task_bytes`, at least two per one of the scheduler's
    `workers`; nothing outside this graph sees its blocks."""
    if isinstance(root, (Source, Rechunk)):
        return None
    direct = direct_reads(root, into)  # rows of a zarr store straight into place
    if direct is not None:
        return direct
    if groups_blocks(root):
        root = grouped(root, config.task_bytes, 2 * workers)
    prefer = Families(runtime.planner)
    lowering = _Lowering(Partition.of(root, prefer), runtime, prefer, local=True)
    lowering.workers = workers
    _, layer, deps, reads = lowering.group(root, into)
    graph, keys = _merged(deps, reads, layer), list(layer)
    if all(n.one_buffer for n in topological(root) if isinstance(n, Source)):
        return graph, keys
    return optimize(graph, keys), keys


def groups_blocks(root: Node) -> bool:
    """Whether `lower_into` groups `root`'s small blocks (`config.task_bytes`): not where the graph
    reads resident blocks and `config.device_task_bytes` batches its tasks instead (resident
    blocks cannot merge: a coarser block would read them as pieces)."""
    if not config.task_bytes:
        return False
    sources = [n.array for n in topological(root) if isinstance(n, Source)]
    return not (config.device_task_bytes and _reads_device_blocks(sources))


def _reads_device_blocks(arrays: Iterable[da.Array]) -> bool:
    """Whether one of the dask `arrays` holds device blocks in its graph (`persist(device=True)`)."""
    for arr in arrays:
        graph = arr.__dask_graph__()
        first = next(iter(core_flatten(arr.__dask_keys__())), None)
        if first is not None and base.is_device_block(graph.get(first)):
            return True
    return False


def _chunks_of(keys: Any, chunks: dict) -> Any:
    """`keys` (a key, or nested lists of keys) with each key replaced by its held chunk."""
    return [_chunks_of(k, chunks) for k in keys] if isinstance(keys, list) else chunks[keys]


def _held_chunks(arr: da.Array) -> dict | None:
    """`arr`'s chunks by key when every one is a numpy array held in its graph (a `from_array`
    of a numpy array: views of it), else None."""
    graph = arr.__dask_graph__()
    found = {}
    for key in core_flatten(arr.__dask_keys__()):
        value = graph.get(key)
        if not isinstance(value, np.ndarray):
            return None
        found[key] = value
    return found


def tasks(partition: Partition, node: Node) -> Iterator[tuple[tuple[int, ...], Task]]:
    """Every output block of `node`'s group with its fused task."""
    for block in node.blocks():
        yield block, recipe(partition, node, block)


def _key(nested: Any, block: tuple[int, ...]) -> Any:
    for i in block:
        nested = nested[i]
    return nested


def meta(ndim: int, dtype: np.dtype) -> np.ndarray:
    """An empty array of `ndim` dims and `dtype`: what dask's `meta=` wants."""
    return np.empty((0,) * ndim, dtype=dtype)


def from_layer(name: str, layer: dict, deps: list[da.Array], chunks: tuple[tuple[int, ...], ...],
               dtype: np.dtype, inner: dict[str, dict] | None = None) -> da.Array:
    """A dask array whose blocks are `layer`'s keys `(name, *block)`, reading from `deps` and
    from the `inner` layers (by name), which read from `deps` too."""
    m = meta(len(chunks), dtype)
    inner = inner or {}
    if da.array_expr_enabled():
        from dask.array._array_expr._collection import from_graph

        keys = [k for k in layer if k[0] == name]  # not the tasks of several blocks (`graph.batched`)
        return from_graph(_merged(deps, inner, layer), m, chunks, keys, name)
    if not inner:
        graph = HighLevelGraph.from_collections(name, layer, dependencies=deps)
        return da.Array(graph, name, chunks, meta=m, dtype=dtype)
    layers: dict[str, Any] = {}
    depends: dict[str, set[str]] = {}
    below: set[str] = set()
    for dep in deps:
        hlg = dep.__dask_graph__()
        if not isinstance(hlg, HighLevelGraph):
            hlg = HighLevelGraph.from_collections(dep.name, dict(hlg))
        layers.update(hlg.layers)
        depends.update(hlg.dependencies)
        below.update(dep.__dask_layers__())
    for inner_name, extra in inner.items():
        layers[inner_name] = MaterializedLayer(extra)
        depends[inner_name] = set(below)
    layers[name] = MaterializedLayer(layer)
    depends[name] = below | set(inner)
    return da.Array(HighLevelGraph(layers, depends), name, chunks, meta=m, dtype=dtype)


def _merged(deps: list[da.Array], inner: dict[str, dict], layer: dict) -> dict:
    """One plain task graph: the graphs of `deps`, the `inner` layers, then `layer`."""
    graph: dict = {}
    for dep in deps:
        graph.update(dep.__dask_graph__())
    for extra in inner.values():
        graph.update(extra)
    graph.update(layer)
    return graph
