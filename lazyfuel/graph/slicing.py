"""Basic indexing (`getitem`): a slice taken below the ops it can pass (element-wise ops, selects,
FFTs on other axes, transposes), so only what is picked is computed; otherwise a `Slice` view.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from lazyfuel.graph.fft import Transform
from lazyfuel.graph.fft import transform as fft_transform
from lazyfuel.graph.ir import (
    Contiguize,
    Gather,
    IndexSelect,
    MaskedFill,
    Node,
    Rechunk,
    Slice,
    Transpose,
)
from lazyfuel.graph.layout_ops import transpose
from lazyfuel.graph.select_ops import gather, index_select


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
        data, mask = _sliced(x.data, key), _sliced(x.mask, key)
        # a select's slice keeps the select's own chunks, a view's slice cuts the view's: the
        # mask follows the data's again
        return MaskedFill(data, mask if mask.chunks == data.chunks else Rechunk(mask, data.chunks), x.value)
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
