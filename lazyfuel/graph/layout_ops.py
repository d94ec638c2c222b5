"""Building the layout ops: `transpose` and `broadcast_to` (views: they move no data) and
`contiguous` (an explicit copy); basic indexing is `graph.slicing`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from lazyfuel import checks
from lazyfuel.graph.ir import (
    Broadcast,
    Contiguize,
    Node,
    Slice,
    Transpose,
)
from lazyfuel.layout import Layout, normalize_dim
from lazyfuel.layout import broadcast_to as broadcast_layout


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


def _with_0d(x: Node, make: Any) -> Node:
    if x.ndim:
        return make(x)
    return Slice(make(broadcast_to(x, (1,))), (0,))
