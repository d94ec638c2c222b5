"""Building the selects (`index_select`, `gather`): dim and index shape checked, concrete indices
checked and snapshotted now, lazy ones by dtype now and by value when computed; indices of
unknown chunk sizes make a `Deferred` node.
"""

from __future__ import annotations

import math
from typing import Any

import dask.array as da
import numpy as np
from dask.base import tokenize

from lazyfuel import checks
from lazyfuel.graph import chunks as ch
from lazyfuel.graph.ir import (
    Deferred,
    Gather,
    IndexSelect,
    Indices,
    Node,
    Rechunk,
    Slice,
    resolved,
)
from lazyfuel.graph.layout_ops import broadcast_to
from lazyfuel.graph.sources import is_lazy, source
from lazyfuel.layout import normalize_dim
from lazyfuel.ops.index_select import check_0d_count, check_index_shape


def index_select(x: Node, dim: Any, indices: Any) -> Node:
    """Slices of `x` along `dim` at 1-d `indices` (a 0-d index counts as one).

    Raises IndexError (dim or an index out of range), TypeError (indices not integers),
    ValueError (indices of more than one dim; a 0-d `x` given other than one index).
    """
    x = resolved(x)
    d = normalize_dim(dim, x.ndim)
    shape = tuple(indices.shape) if is_lazy(indices) else np.shape(indices)
    check_index_shape(shape)
    if unknown_sizes(indices):
        along = tuple(indices.chunks[0]) if shape else (1,)
        return _deferred(index_select, x, d, indices, (*x.shape[:d], sum(along), *x.shape[d + 1:]),
                         (*x.chunks[:d], along, *x.chunks[d + 1:]))
    if x.ndim == 0:
        check_0d_count(math.prod(shape))
    data = broadcast_to(x, (1,)) if x.ndim == 0 else x
    if is_lazy(indices):
        idx = _lazy_indices(indices, data.shape[d], ndim=1)
        along = idx.node.chunks[0]
    else:
        along = ch.split(math.prod(shape), max(data.chunks[d]))
        idx = _concrete_indices(indices, data.shape[d], (along,))
    n = sum(along)
    out_shape = (*data.shape[:d], n, *data.shape[d + 1:])
    out_chunks = (*data.chunks[:d], along, *data.chunks[d + 1:])
    out: Node = IndexSelect(data, d, idx, out_shape, out_chunks)
    return Slice(out, (0,)) if x.ndim == 0 else out


def gather(x: Node, dim: Any, indices: Any) -> Node:
    """Elements of `x` picked along `dim` by an index array of `x`'s rank; the index's shape.

    Raises IndexError (dim or an index out of range), TypeError (indices not integers),
    ValueError (the index shape does not fit `x`).
    """
    x = resolved(x)
    shape = tuple(indices.shape) if is_lazy(indices) else np.shape(indices)
    if unknown_sizes(indices):  # the shapes are checked once the sizes are known
        normalize_dim(dim, x.ndim)
        return _deferred(gather, x, dim, indices, shape, tuple(tuple(c) for c in indices.chunks))
    d = checks.check_gather_shapes(x.shape, shape, dim)
    data = broadcast_to(x, (1,)) if x.ndim == 0 else x
    ishape = shape or (1,)
    lazy = _lazy_indices(indices, data.shape[d], ndim=len(ishape)) if is_lazy(indices) else None
    along = lazy.node.chunks[d] if lazy else ch.split(ishape[d], max(data.chunks[d]))
    out_chunks = tuple(along if a == d else data.chunks[a] if ishape[a] == data.shape[a] else (ishape[a],)
                       for a in range(len(ishape)))
    idx = lazy or _concrete_indices(indices, data.shape[d], out_chunks)
    if idx.lazy and idx.node.chunks != out_chunks:
        idx = Indices.of_node(Rechunk(idx.node, out_chunks), data.shape[d])
    out: Node = Gather(data, d, idx, ishape, out_chunks)
    return Slice(out, (0,)) if len(shape) == 0 else out


def unknown_sizes(indices: Any) -> bool:
    """Lazy indices whose chunk sizes nobody knows yet: a dask array with NaN chunks (from
    `nonzero()` or a boolean selection), or a `Deferred` node."""
    if isinstance(indices, Deferred):
        return True
    return isinstance(indices, da.Array) and any(math.isnan(n) for c in indices.chunks for n in c)


def _deferred(op: Any, x: Node, dim: int, indices: Any, shape: tuple[float, ...],
              chunks: tuple[tuple[float, ...], ...]) -> Deferred:
    """`op(x, dim, indices)` for indices of unknown chunk sizes: their dtype checked now, and
    a node with NaN where the sizes are unknown, which becomes the real select when it is
    needed (`Deferred.resolved`): then the indices alone are computed, once (`with_sizes`)."""
    checks.integer_indices(np.empty(0, indices.dtype), 1)  # TypeError for float / bool now

    def make() -> Node:
        return op(x, dim, with_sizes(indices))

    label = "index_select" if op is index_select else "gather"
    return Deferred(make, tuple(shape), chunks, x.dtype, label, tokenize(label, x.name, dim, indices.name))


def with_sizes(indices: Any) -> Any:
    """Indices of unknown chunk sizes computed (held in memory) with their sizes known: a
    persisted dask array, or the node a `Deferred` one stands for."""
    if isinstance(indices, Deferred):
        return indices.resolved
    held = indices.persist()
    held.compute_chunk_sizes()  # reads the held chunks' shapes: nothing is computed again
    return held


def _concrete_indices(indices: Any, axis_len: int, chunks: ch.Chunks) -> Indices:
    """Concrete indices checked now, block by block of `chunks` (how the select reads them), and
    kept as a snapshot (`Indices.concrete`)."""
    return Indices.concrete(indices, axis_len, chunks)


def _lazy_indices(indices: Any, axis_len: int, ndim: int) -> Indices:
    """Lazy indices (a dask array or a node) of `ndim` dims (0-d broadcast to ones): their dtype
    checked now (TypeError for float / bool), their values when computed."""
    node = source(indices, data=False)
    if node.ndim == 0:
        node = broadcast_to(node, (1,) * ndim)
    return Indices.of_node(node, axis_len)
