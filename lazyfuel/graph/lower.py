"""Lowering: lazyfuel's graph to a dask array, one HighLevelGraph layer per fused group.

Every fused group maps output blocks to leaf chunks in its own way (views permute, pick and
broadcast blocks; a select reads the chunks its indices hit), so each group becomes one
`HighLevelGraph` layer of `run_block` tasks whose dependencies are exactly the chunks they read.
Sources stay the dask arrays they are, and rechunks are dask's own. The result is an ordinary
`dask.array.Array` built with `meta=` and `dtype=` given, in dask's legacy mode through its public
constructor and in the array-expression mode through `from_graph` (the only way that mode takes a
hand-made graph), so both modes work.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from lazyfuel.graph.fuse import Partition, Task, recipe
from lazyfuel.graph.ir import Node, Rechunk, Source
from lazyfuel.graph.task import Runtime, run_block


def lower(root: Node, runtime: Runtime) -> da.Array:
    """The dask array computing `root`; nothing runs."""
    return _Lowering(Partition.of(root), runtime).array(root)


class _Lowering:
    """Lowers the nodes of one graph, each once (memoized by name)."""

    def __init__(self, partition: Partition, runtime: Runtime) -> None:
        self.partition, self.runtime = partition, runtime
        self.done: dict[str, da.Array] = {}

    def array(self, node: Node) -> da.Array:
        found = self.done.get(node.name)
        if found is None:
            found = self.done[node.name] = self._lower(node)
        return found

    def _lower(self, node: Node) -> da.Array:
        if isinstance(node, Source):
            return node.array
        if isinstance(node, Rechunk):
            return self.array(node.input).rechunk(node.chunks)
        leaves = self.partition.rooted_at(node).leaves(node)
        deps = {leaf.name: self.array(leaf) for leaf in leaves}
        keys = {name: arr.__dask_keys__() for name, arr in deps.items()}
        name = f"lazyfuel-{node.label}-{tokenize(node.name, self.runtime)}"
        layer = {}
        for block, task in tasks(self.partition, node):
            args = tuple(_key(keys[k[0]], k[1:]) for k in task.keys)
            layer[(name, *block)] = (run_block, task.recipe, self.runtime, *args)
        return from_layer(name, layer, list(deps.values()), node.chunks, node.dtype)


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
               dtype: np.dtype) -> da.Array:
    """A dask array whose blocks are `layer`'s keys `(name, *block)`, reading from `deps`."""
    m = meta(len(chunks), dtype)
    if da.array_expr_enabled():
        from dask.array._array_expr._collection import from_graph

        graph: dict = {}
        for dep in deps:
            graph.update(dep.__dask_graph__())
        graph.update(layer)
        return from_graph(graph, m, chunks, list(layer), name)
    graph = HighLevelGraph.from_collections(name, layer, dependencies=deps)
    return da.Array(graph, name, chunks, meta=m, dtype=dtype)
