"""The host arrays a graph reads in place: what a result written into `out=` must not overlap.

A graph holds numpy memory in three ways: the chunks of a `from_array` source (views of the
user's array, `graph.ops.numpy_source`, or an array inside a dask `from_array` graph), concrete
indices (`ir.Indices.values`: a read-only snapshot of lazyfuel's own, which no `out` can share),
and masks (sources too). `held_arrays` walks the graph once and names each with the role it
plays, for messages.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from lazyfuel.graph.ir import MaskedFill, Node, Select, Source, View


def held_arrays(root: Node) -> Iterator[tuple[str, np.ndarray]]:
    """(role, array) for every numpy array the graph under `root` reads in place."""
    seen: set[int] = set()
    stack: list[tuple[Node, str]] = [(root, "the source array")]
    while stack:
        node, role = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, Source):
            for a in _graph_arrays(node.array):
                yield role, a
            continue
        if isinstance(node, Select) and node.indices.values is not None:
            yield f"the indices of {node.label}", node.indices.values
        for i, child in enumerate(node.inputs):
            if isinstance(node, MaskedFill) and i == 1:
                stack.append((child, "the mask of masked_fill"))
            elif isinstance(node, Select) and i == 1:
                stack.append((child, f"the indices of {node.label}"))
            else:
                stack.append((child, role if isinstance(node, View) else f"the data of {node.label}"))


def _graph_arrays(arr: Any) -> Iterator[np.ndarray]:
    """numpy arrays held as values of a dask array's graph (directly or in a data node)."""
    for value in arr.__dask_graph__().values():
        value = getattr(value, "value", value)  # dask's DataNode
        if isinstance(value, np.ndarray):
            yield value


def overlapping(out: np.ndarray, root: Node) -> tuple[str, np.ndarray] | None:
    """The first array the graph reads whose memory `out` shares (or may share, where numpy
    cannot tell within its work limit), else None."""
    for role, a in held_arrays(root):
        if not np.may_share_memory(out, a):
            continue
        try:
            if np.shares_memory(out, a, max_work=1_000_000):
                return role, a
        except np.exceptions.TooHardError:
            return role, a
    return None
