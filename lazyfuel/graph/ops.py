"""Building the graph for each op: user input checked when the op is built, then a node made.

Each function takes nodes (or numpy / dask input, made into sources) and returns a node; nothing
runs. Concrete (numpy, list, scalar) indices and masks are checked here with `lazyfuel.checks`,
so a bad index raises IndexError at the call, as in PyTorch; lazy ones (dask arrays, lazyfuel
nodes) have their dtype and shape checked here and their values checked when their chunks are
computed. Concrete indices are a snapshot: changing the caller's array after the op was built
changes nothing (`graph.indices`). A 0-d array behaves as one element along dim 0 (PyTorch):
ops see it as shape (1,) and the result is viewed back to 0-d.
"""

from __future__ import annotations

import dataclasses
import math
from itertools import product
from typing import Any

import dask.array as da
import numpy as np
from dask.array.core import normalize_chunks, slices_from_chunks
from dask.base import tokenize

from lazyfuel import checks
from lazyfuel.dtypes import DType, as_native, native
from lazyfuel.graph import chunks as ch
from lazyfuel.graph.fft import Transform
from lazyfuel.graph.fft import transform as fft_transform
from lazyfuel.graph.ir import (
    Broadcast,
    Contiguize,
    Deferred,
    Gather,
    IndexSelect,
    Indices,
    MaskedFill,
    Node,
    Rechunk,
    Slice,
    Source,
    Transpose,
    resolved,
)
from lazyfuel.graph.lower import from_layer
from lazyfuel.graph.stored import regular_chunks
from lazyfuel.layout import Layout, normalize_dim
from lazyfuel.layout import broadcast_to as broadcast_layout
from lazyfuel.ops.index_select import check_0d_count, check_index_shape


def is_lazy(obj: Any) -> bool:
    """A lazyfuel node or a dask array (values known only at compute time)."""
    return isinstance(obj, Node) or isinstance(obj, da.Array)


def source(obj: Any, chunks: Any = "auto", data: bool = True) -> Node:
    """`obj` as a node: nodes as they are, dask arrays (rechunked if `chunks` is given), numpy
    arrays and array-likes cut into `chunks` (dask's `from_array`). Data in non-native byte order
    (`>i4` on this machine) is converted to native order chunk by chunk where each chunk is read
    (`native_chunks`), and the Source says so (`stored`).

    Raises TypeError for a dtype lazyfuel does not handle (when `data`: indices may have any
    integer dtype), ValueError for unknown chunk sizes.
    """
    if isinstance(obj, Node):
        return resolved(obj)
    checks.refuse_masked(obj, "data" if data else "indices")
    one_buffer = not isinstance(obj, da.Array)
    if isinstance(obj, da.Array):
        arr = obj if chunks == "auto" else obj.rechunk(chunks)
    else:
        a = np.asarray(obj)
        if data:
            DType.from_numpy(native(a.dtype))
        arr = numpy_source(a, chunks)
    stored = np.dtype(arr.dtype)
    if not stored.isnative:
        arr, one_buffer = native_chunks(arr), False
    if data:
        DType.from_numpy(arr.dtype)
    if any(math.isnan(n) for c in arr.chunks for n in c):
        raise ValueError("the dask array has unknown chunk sizes; call .compute_chunk_sizes() first")
    return Source(arr, one_buffer=one_buffer, stored=None if stored.isnative else stored)


def zarr_source(arr: Any, array: da.Array | None = None) -> Source:
    """A source over a zarr array (or the `integrity.VerifiedChunks` over one lazyfuel wrote, read
    through `array`, its verified dask array), cut into its chunks (a sharded array: its shards),
    that a select reads row by row (`graph.stored`)."""
    node = source(da.from_zarr(arr, chunks=regular_chunks(arr)) if array is None else array)
    return dataclasses.replace(node, zarr=arr)


def native_chunks(arr: da.Array) -> da.Array:
    """`arr` (non-native byte order) with each chunk converted to native order as it is read: one
    byte-swapping pass per chunk, in a task of its own that every reader of the chunk shares, so
    kernels only ever see native data."""
    want = native(arr.dtype)
    return arr.map_blocks(as_native, dtype=want, meta=np.empty((0,) * arr.ndim, want),
                          name="native-" + tokenize(arr.name, want.str))


def numpy_source(a: np.ndarray, chunks: Any = "auto") -> da.Array:
    """A dask array whose chunks are the views `a[slices]`: no copy, and no hash of the bytes.

    dask's `from_array` copies `a` and hashes all of its bytes to name the result (about 0.5 s
    for 256 MB here); lazyfuel promises not to copy, and names the array by its identity
    instead: the graph holds views of `a`, so no other live array can share its id and address.
    In dask's array-expression mode, which hashes every graph it is handed, `from_array` is kept.
    """
    if da.array_expr_enabled():
        return da.from_array(a, chunks=chunks)
    normal = normalize_chunks(chunks, a.shape, dtype=a.dtype)
    name = "array-" + tokenize("lazyfuel-view", id(a), a.__array_interface__["data"][0], a.shape,
                               a.strides, a.dtype.str, normal)
    blocks = product(*(range(len(c)) for c in normal))
    layer = {(name, *b): a[s] for b, s in zip(blocks, slices_from_chunks(normal))}
    return from_layer(name, layer, [], normal, a.dtype)


def transpose(x: Node, axes: Any = None) -> Node:
    """Axes permuted (reversed when None), as `numpy.transpose`; a view."""
    if axes is None:
        perm = tuple(reversed(range(x.ndim)))
    else:
        axes = checks.int_sequence(axes, "axes")
        perm = tuple(normalize_dim(a, x.ndim) for a in axes) if x.ndim else tuple(axes)
        if sorted(perm) != list(range(x.ndim)):
            raise ValueError(f"axes {tuple(axes)} are not a permutation of the {x.ndim} dims "
                             f"of an array of shape {x.shape}")
    return x if perm == tuple(range(x.ndim)) else Transpose(x, perm)


def getitem(x: Node, key: Any) -> Node:
    """Basic indexing (ints, slices with any step, `...`); a view.

    Raises IndexError for an int out of range or too many indices, TypeError for advanced
    indexing (arrays, lists, None: use index_select / gather / broadcast_to).
    """
    key = key if isinstance(key, tuple) else (key,)
    if sum(k is Ellipsis for k in key) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if Ellipsis in key:
        at = key.index(Ellipsis)
        key = key[:at] + (slice(None),) * (x.ndim - len(key) + 1) + key[at + 1:]
    if len(key) > x.ndim:
        raise IndexError(f"too many indices: {len(key)} for an array of {x.ndim} dims")
    key = key + (slice(None),) * (x.ndim - len(key))
    norm: list[int | slice] = []
    for k, n in zip(key, x.shape):
        if isinstance(k, slice):
            norm.append(slice(*k.indices(n)))
        elif isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of bounds for an axis of size {n}")
            norm.append(int(k) % n)
        else:
            raise TypeError(f"lazyfuel arrays take basic indices only (ints, slices, ...), got "
                            f"{type(k).__name__}; use index_select or gather to pick by an index array")
    return _sliced(x, tuple(norm))


def _sliced(x: Node, key: tuple[int | slice, ...]) -> Node:
    """`x[key]` (`key` normalised: an int or a normalised slice per axis), taken below the ops
    that compute each element from the same position of their inputs (MaskedFill, Contiguize),
    below selects (`_select_sliced`), below FFTs on the axes they do not transform
    (`_transform_sliced`) and through transposes, when it picks fewer elements than `x`
    has: then only what is picked is computed, and a pick from a huge view reads a few elements,
    not the view (issue 16, case 7). Otherwise a `Slice` view of `x`."""
    if all(isinstance(k, slice) and k == slice(0, n, 1) for k, n in zip(key, x.shape)):
        return x
    picked = math.prod(_kept(k) for k in key)
    if picked == 0 or picked >= math.prod(x.shape):  # nothing to compute, or nothing saved
        return Slice(x, key)
    if isinstance(x, MaskedFill):  # the mask has the data's shape and chunks (`masked_fill`)
        return MaskedFill(_sliced(x.data, key), _sliced(x.mask, key), x.value)
    if isinstance(x, Contiguize):
        return Contiguize(_sliced(x.input, key))
    if isinstance(x, Transpose):
        inner: list[int | slice] = [slice(None)] * x.ndim
        for out_axis, in_axis in enumerate(x.axes):
            inner[in_axis] = key[out_axis]
        kept = [a for a in range(x.ndim) if isinstance(inner[a], slice)]
        perm = tuple(kept.index(x.axes[i]) for i in range(x.ndim) if isinstance(key[i], slice))
        return transpose(_sliced(x.input, tuple(inner)), perm)
    if isinstance(x, (IndexSelect, Gather)):
        return _select_sliced(x, key)
    if isinstance(x, Transform) and any(_kept(k) < n for a, (k, n) in enumerate(zip(key, x.shape))
                                        if a != x.axis):
        return _transform_sliced(x, key)
    return Slice(x, key)


def _transform_sliced(x: Transform, key: tuple[int | slice, ...]) -> Node:
    """`x[key]` as the transform of the picked rows: the input sliced on every axis but the
    transformed one (below the rechunk that made that axis whole), the transformed axis sliced
    in the result; an int becomes a one-long slice, dropped by a view of the result."""
    source = x.input.input if isinstance(x.input, Rechunk) else x.input
    rows = tuple(slice(0, n, 1) if a == x.axis else slice(k, k + 1, 1) if isinstance(k, int) else k
                 for a, (k, n) in enumerate(zip(key, source.shape)))
    out = fft_transform(_sliced(source, rows), x.kind, x.axis, x.n, x.norm)
    return _sliced(out, tuple(k if a == x.axis else 0 if isinstance(k, int) else slice(0, n, 1)
                              for a, (k, n) in enumerate(zip(key, out.shape))))


def _kept(k: int | slice) -> int:
    """How many positions of its axis a normalised key entry keeps (an int keeps one)."""
    return 1 if isinstance(k, int) else len(range(k.start, k.stop, k.step))


def _select_sliced(x: IndexSelect | Gather, key: tuple[int | slice, ...]) -> Node:
    """`x[key]` as the select of the picked part: the source sliced on every axis but the select's
    (a gather's indices alike), the indices sliced along it (an index_select's) or everywhere (a
    gather's); an int becomes a one-long slice, dropped by a view of the result."""
    ranged = tuple(slice(k, k + 1, 1) if isinstance(k, int) else k for k in key)
    data = _sliced(x.data, tuple(slice(0, n, 1) if a == x.dim else k
                                 for a, (k, n) in enumerate(zip(ranged, x.data.shape))))
    index_key = (ranged[x.dim],) if isinstance(x, IndexSelect) else ranged
    if x.indices.node is not None:
        indices: Any = _sliced(x.indices.node, index_key)
    else:
        # a normalised slice's stop is -1 when it runs down through 0: numpy reads that as n - 1
        indices = x.indices.values[tuple(slice(k.start, None if k.stop < 0 else k.stop, k.step)
                                         for k in index_key)]
    out = (index_select if isinstance(x, IndexSelect) else gather)(data, x.dim, indices)
    return _sliced(out, tuple(0 if isinstance(k, int) else slice(0, n, 1) for k, n in zip(key, out.shape)))


def broadcast_to(x: Node, shape: Any) -> Node:
    """`x` stretched to `shape` (numpy rules); new and stretched dims are one chunk; a view.

    `shape` is an int or a sequence of ints, as numpy takes it. Raises TypeError for anything else
    (floats, strings, bools: nothing is truncated or parsed), ValueError for a negative extent, more
    elements than numpy can index, or if `x`'s shape does not broadcast to `shape`.
    """
    shape = checks.int_sequence(shape, "shape")
    negative = [n for n in shape if n < 0]
    if negative:
        raise ValueError(f"broadcast_to: shape {shape} has a negative extent {negative[0]}")
    if math.prod(shape) > np.iinfo(np.intp).max:
        raise ValueError(f"broadcast_to: shape {shape} has more elements than numpy can index "
                         f"({np.iinfo(np.intp).max})")
    if shape == x.shape:
        return x
    broadcast_layout(Layout.contiguous(x.shape), shape)  # raises ValueError naming both shapes
    lead = len(shape) - x.ndim
    chunks = tuple(((n,) if i < lead or x.shape[i - lead] != n else x.chunks[i - lead])
                   for i, n in enumerate(shape))
    return Broadcast(x, shape, chunks)


def contiguous(x: Node) -> Node:
    """An explicit Contiguize of `x`."""
    return _with_0d(x, Contiguize)


def masked_fill(x: Node, mask: Any, value: Any) -> Node:
    """`x` with `value` where `mask` is true; `mask` bool. The result has the shape `x` and `mask`
    broadcast to together (numpy rules, as `np.where(mask, value, x)`): a mask larger than `x`
    stretches `x` up first (a Broadcast view, `_stretched_to`).

    Raises TypeError (mask not bool: a uint8 mask is refused; value not a scalar), ValueError
    (mask and `x` do not broadcast together, x's dtype cannot hold the value).
    """
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    checks.fill_bytes(value, DType.from_numpy(x.dtype))
    if is_lazy(mask):
        checks.refuse_masked(mask, "mask")
        checks.check_mask(np.empty(0, mask.dtype))
    else:
        mask = checks.check_mask(mask)
    shape = checks.masked_fill_shape(mask.shape, x.shape)
    if shape != x.shape:
        x = _stretched_to(x, shape, mask.chunks if is_lazy(mask) else None)
    if x.ndim == 0:
        mask_node = broadcast_to(source(mask), (1,))
        return Slice(MaskedFill(broadcast_to(x, (1,)), mask_node, value), (0,))
    lead = x.ndim - len(mask.shape)
    aligned = tuple(x.chunks[lead + i] if n == x.shape[lead + i] else (n,) for i, n in enumerate(mask.shape))
    if is_lazy(mask):
        m = source(mask)
        m = m if m.chunks == aligned else Rechunk(m, aligned)
    else:
        m = source(mask, aligned)
    if m.shape != x.shape:
        m = Broadcast(m, x.shape, x.chunks)
    return MaskedFill(x, m, value)


def _stretched_to(x: Node, shape: tuple[int, ...], mask_chunks: ch.Chunks | None) -> Node:
    """`x` broadcast up to `shape` (a larger mask's common shape), as a view. Dims `x` keeps keep
    its chunks; a new or stretched dim takes a lazy mask's chunks there (so the mask is not
    rechunked), or dask's "auto" chunks given the others (blocks of about `array.chunk-size`)."""
    lead = len(shape) - x.ndim
    mask_lead = len(shape) - len(mask_chunks) if mask_chunks is not None else 0
    wanted: list[Any] = []
    for i, n in enumerate(shape):
        if i >= lead and x.shape[i - lead] == n:
            wanted.append(x.chunks[i - lead])
        elif mask_chunks is not None and i >= mask_lead and sum(mask_chunks[i - mask_lead]) == n:
            wanted.append(mask_chunks[i - mask_lead])
        else:
            wanted.append("auto" if math.prod(shape) else (n,))  # dask's auto divides by the size
    chunks = normalize_chunks(tuple(wanted), shape, dtype=x.dtype)
    return Broadcast(x, shape, tuple(tuple(int(c) for c in cs) for cs in chunks))


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


def _with_0d(x: Node, make: Any) -> Node:
    if x.ndim:
        return make(x)
    return Slice(make(broadcast_to(x, (1,))), (0,))
