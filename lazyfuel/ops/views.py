"""The layout ops (`x.T` / `transpose`, `x[key]` / `getitem`, `broadcast_to`): views that move no data.

A chain node of a view names it (`OpNode("transpose", (v,), (("axes", axes),))`); each has one
`ViewSpec` here with what the layers above need of it: the layout it gives (`layout`, what the
planner follows), the numpy view (`numpy`, what a task applies to a leaf chunk), and how
`graph.split` halves through it (`cut`, `shape`). A getitem key travels in hashable form
(`encode_key` / `decode_key`: slices as tuples).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from lazyfuel import layout as layouts
from lazyfuel.layout import Layout
from lazyfuel.ops.spec import CutRule, ShapeRule


def encode_key(key: tuple[int | slice, ...]) -> tuple[Any, ...]:
    """A basic-indexing key in hashable form (slices as tuples)."""
    return tuple(("slice", k.start, k.stop, k.step) if isinstance(k, slice) else int(k) for k in key)


def decode_key(key: tuple[Any, ...]) -> tuple[int | slice, ...]:
    """The inverse of `encode_key`."""
    return tuple(slice(*k[1:]) if isinstance(k, tuple) else k for k in key)


@dataclass(frozen=True)
class ViewSpec:
    """One view: its chain-node name, its layout rule, its numpy rule and its halving rules."""

    name: str
    layout: Callable[[Layout, Mapping[str, Any]], Layout]
    numpy: Callable[[np.ndarray, Mapping[str, Any]], np.ndarray]
    cut: CutRule
    shape: ShapeRule


def _getitem_cut(attr: Mapping[str, Any], axis: int, shapes: list[Any]) -> list[int | None] | None:
    """The source axis the output axis comes from, when that axis is taken whole."""
    key = decode_key(attr["key"])
    kept = [i for i in range(len(shapes[0])) if i >= len(key) or isinstance(key[i], slice)]
    source = kept[axis]
    if source < len(key):
        n = shapes[0][source]
        if key[source].indices(n) != (0, n, 1):
            return None
    return [source]


def _broadcast_cut(attr: Mapping[str, Any], axis: int, shapes: list[Any]) -> list[int | None]:
    """The source's own axis (cut alike), or a broadcast one (the source whole)."""
    source = axis - (len(attr["shape"]) - len(shapes[0]))
    return [source] if source >= 0 and shapes[0][source] != 1 else [None]


def _getitem_shape(shape: tuple[int, ...], key: Any) -> tuple[int, ...]:
    """The shape `a[key]` has for an `a` of `shape` (on a stride-0 stand-in: no memory)."""
    return np.broadcast_to(np.empty((), np.uint8), shape)[decode_key(key)].shape


VIEWS: dict[str, ViewSpec] = {v.name: v for v in (
    ViewSpec("transpose", lambda lay, a: layouts.transpose(lay, a.get("axes")),
             lambda x, a: x.transpose(a["axes"]), lambda a, axis, s: [a["axes"][axis]],
             lambda a, s: tuple(s[0][i] for i in a["axes"])),
    ViewSpec("getitem", lambda lay, a: layouts.getitem(lay, decode_key(a["key"])),
             lambda x, a: x[decode_key(a["key"])], _getitem_cut, lambda a, s: _getitem_shape(s[0], a["key"])),
    ViewSpec("broadcast_to", lambda lay, a: layouts.broadcast_to(lay, a["shape"]),
             lambda x, a: np.broadcast_to(x, a["shape"]), _broadcast_cut, lambda a, s: tuple(a["shape"])),
)}
VIEW_OPS = tuple(VIEWS)  # the chain-node names of views
