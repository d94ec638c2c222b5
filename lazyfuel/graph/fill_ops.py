"""Building `masked_fill`: the mask and the fill value checked (concrete masks at once, lazy ones by
dtype), `x` stretched up where the mask is larger, the mask aligned to `x`'s chunks.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from dask.array.core import normalize_chunks

from lazyfuel import checks
from lazyfuel.dtypes import DType
from lazyfuel.graph import chunks as ch
from lazyfuel.graph.ir import (
    Broadcast,
    MaskedFill,
    Node,
    Rechunk,
    Slice,
)
from lazyfuel.graph.layout_ops import broadcast_to
from lazyfuel.graph.sources import is_lazy, source


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
