"""Spanning views: several chunks that are views of one buffer, seen as one array without a copy.

dask's `from_array` of a numpy array hands tasks `x[slices]`: views of one base laid out one
after the other along each axis. A select whose indices hit several such chunks need not
concatenate them on the host: `spanning_view` checks, with pointer arithmetic on the chunks in
hand, that part i+1 starts exactly where the axis stride puts it after part i (same strides, same
extents on the other axes, same owning buffer), and returns one strided view over them all in
O(1). Anything else (separate buffers, different strides, gaps it would not pay to span) gives
None and the caller falls back to copying.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise

import numpy as np
from numpy.lib.stride_tricks import as_strided

from lazyfuel.layout import Layout


def owner(a: np.ndarray) -> object:
    """The object that owns `a`'s memory: the end of its `.base` chain (`a` itself if it owns it).

    The chain also passes through the array-interface holders that `as_strided` puts between a
    view and its base (they keep a `.base` array), so a spanning view has its parts' owner.
    """
    obj: object = a
    while True:
        base = getattr(obj, "base", None)
        if base is None:
            return obj
        # the cheap tests first: `__array_interface__` builds a dict
        if isinstance(obj, np.ndarray) or (isinstance(base, np.ndarray)
                                           and hasattr(obj, "__array_interface__")):
            obj = base
        else:
            return obj


def address(a: np.ndarray) -> int:
    """The address of `a[0, 0, …]` (not the lowest address a reversed view touches)."""
    return int(a.__array_interface__["data"][0])


def spanning_view(parts: Sequence[np.ndarray], starts: Sequence[int], axis: int,
                  max_gap: int | None = None) -> np.ndarray | None:
    """One read-only view covering `parts` along `axis`, or None if they do not line up.

    `parts[i]` holds positions `starts[i] … starts[i] + parts[i].shape[axis]` of a larger array
    along `axis` (starts increasing; parts empty along `axis` are left out, and the view starts
    at the first part that is not). The view covers positions `starts[0]` to the end of the last
    part, gaps between parts included: that is memory-safe because every part lies in one owning
    buffer and the view's elements lie between theirs. A gap is spanned only if it holds at most
    `max_gap` positions in all (default: no more than the parts hold together), since a backend
    that copies its inputs would copy the gap too.

    Conditions: numpy arrays (a device block gives None); one dtype, ndim and owner; equal
    extents and strides on every other axis (strides of extent-1 axes are free); one stride `s`
    along `axis` shared by every part with more than one position there; and
    address(part i) == address(part 0) + (starts[i] - starts[0]) * s.
    """
    if len(parts) != len(starts) or not 0 <= axis < min((p.ndim for p in parts), default=0):
        return None
    if not all(isinstance(p, np.ndarray) for p in parts):
        return None  # a device block (`persist(device=True)`) has no host address to span
    kept = [(p, s) for p, s in zip(parts, starts) if p.shape[axis]]  # an empty part adds nothing
    if not kept:
        return None
    parts, starts = [p for p, _ in kept], [s for _, s in kept]
    first = parts[0]
    if len(parts) == 1:
        return first
    if any(s1 <= s0 for s0, s1 in pairwise(starts)) or any(p.size == 0 for p in parts):
        return None
    # the gap first: it needs no look at the parts' memory (random lookups hit scattered chunks)
    extents = [p.shape[axis] for p in parts]
    if not gap_allows(starts, extents, max_gap):
        return None
    extent = starts[-1] + extents[-1] - starts[0]
    root = owner(first)
    # one pass over the parts (a task runs this for every block it reads): the other axes'
    # extents and (where they matter) strides as tuples, compared with the first part's
    others = [k for k in range(first.ndim) if k != axis]
    free = [k for k in others if first.shape[k] > 1]
    extents = tuple(first.shape[k] for k in others)
    steps = tuple(first.strides[k] for k in free)
    stride = _axis_stride(parts, starts, axis)
    if stride is None:
        return None
    base = address(first)
    for p, start in zip(parts, starts):
        if p.ndim != first.ndim or p.dtype != first.dtype or owner(p) is not root:
            return None
        if tuple(p.shape[k] for k in others) != extents or tuple(p.strides[k] for k in free) != steps:
            return None
        if p.shape[axis] > 1 and p.strides[axis] != stride:
            return None
        if address(p) != base + (start - starts[0]) * stride:
            return None
    shape = list(first.shape)
    shape[axis] = extent
    strides = list(first.strides)
    strides[axis] = stride
    return as_strided(first, shape=tuple(shape), strides=tuple(strides), writeable=False)


def span_is_cheap(layout: Layout, axis: int, starts: Sequence[int], extents: Sequence[int]) -> bool:
    """Whether a span over parts laid out as `layout` (one part's view, at `starts` with `extents`
    along `axis`) touches no more memory than joining the parts would allocate, whatever the gap:
    true of views with stride-0 axes (a broadcast), whose positions each touch far less memory
    than the elements they show. Joining them materialised every part (issue 16, case 7)."""
    kept = [(s, e) for s, e in zip(starts, extents) if e]
    if len(kept) < 2:
        return True
    extent = kept[-1][0] + kept[-1][1] - kept[0][0]
    shown = math.prod(n for k, n in enumerate(layout.shape) if k != axis)
    touched = sum(abs(st) * (n - 1) for k, (n, st) in enumerate(zip(layout.shape, layout.strides))
                  if k != axis) + 1
    step = max(abs(layout.strides[axis]), 1)
    return step * (extent - 1) + touched <= sum(e for _, e in kept) * shown


def gap_allows(starts: Sequence[int], extents: Sequence[int], max_gap: int | None = None) -> bool:
    """Whether parts at `starts` with `extents` along the axis (nonempty ones, in order) are close
    enough to span: the positions between them hold at most `max_gap` (default: no more than the
    parts hold together). Needs no array: the recipe asks before any chunk exists."""
    kept = [(s, e) for s, e in zip(starts, extents) if e]
    if len(kept) < 2:
        return True
    held = sum(e for _, e in kept)
    gap = kept[-1][0] + kept[-1][1] - kept[0][0] - held
    return gap <= (held if max_gap is None else max_gap)


def _axis_stride(parts: Sequence[np.ndarray], starts: Sequence[int], axis: int) -> int | None:
    """The byte stride along `axis`: a part's own (one holding > 1 position), else the step
    between the first two parts' addresses (None if it is not a whole multiple)."""
    for p in parts:
        if p.shape[axis] > 1:
            return int(p.strides[axis])
    step, apart = address(parts[1]) - address(parts[0]), starts[1] - starts[0]
    return step // apart if step % apart == 0 else None
