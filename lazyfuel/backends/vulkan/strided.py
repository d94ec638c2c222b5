"""Strided-reading select kernels: index_select and gather straight from any view of the source.

The contiguous kernels (`kernels.IndexSelectKernel`, `kernels.GatherKernel`) need a Contiguize step
in front of a transposed, sliced, reversed, offset or broadcast source; these read the source
through its layout (shape, strides in elements, offset; stride 0 = broadcast, < 0 = reversed)
directly, so the view is resolved and selected in one pass (`shaders/strided_select.comp`). Same op
params, same status word and the same errors as the contiguous kernels; output contiguous.

Before dispatching, the host merges the source's dims on each side of the selected one
(`merge_around`: extent-1 dims dropped, dims merged where their strides allow) and, for
index_select, moves several elements as one wider word when the innermost dim is dense
(`copy_kernels.widen`). The shader takes at most `MAX_STRIDED_RANK` dims; a view that still has more
after merging is contiguized on the device first, in the same command buffer.
"""

from __future__ import annotations

import math
from typing import Any

from lazyfuel.backends.vulkan.batch import Batch
from lazyfuel.backends.vulkan.copy_kernels import contiguized, widen
from lazyfuel.backends.vulkan.kernels import (
    I31_LIMIT,
    DeviceValue,
    GatherKernel,
    IndexSelectKernel,
    StatusSlot,
    bind,
    gather_params,
    per_group,
    require,
    spec_constants,
    storage_buffers,
)
from lazyfuel.backends.vulkan.memory import Allocation
from lazyfuel.layout import Layout
from lazyfuel.ops.index_select import IndexSelectParams

MAX_STRIDED_RANK = 6  # dims the shader's push constants hold (128 bytes)
FAMILY = "strided_select"
_FORMAT = "<5Q7q8I"  # src dst aux status base | offset strides[6] | shape[6] dim_size walk_len
WALK_INVOCATIONS = 1024  # invocations a walk along one dim aims for (16 workgroups: every CPU core)
WALK_LANES = 16  # neighbouring invocations along the innermost dim in one tile (the shader's LANES)


def merge_around(layout: Layout, dim: int) -> tuple[Layout, int]:
    """The same elements in the same order, with extent-1 dims other than `dim` dropped and
    neighbouring dims on the same side of `dim` merged where their strides allow; returns the
    layout and where `dim` went."""
    groups: list[list[tuple[int, int]]] = [[], [], []]  # before dim, dim, after dim
    for i, (n, s) in enumerate(zip(layout.shape, layout.strides)):
        side = 0 if i < dim else (1 if i == dim else 2)
        if side != 1 and n == 1:
            continue
        group = groups[side]
        if side != 1 and group and group[-1][1] == s * n:
            group[-1] = (group[-1][0] * n, s)
        else:
            group.append((n, s))
    dims = groups[0] + groups[1] + groups[2]
    return Layout(tuple(n for n, _ in dims), tuple(s for _, s in dims), layout.offset), len(groups[0])


def index_select_dim(shape: tuple[int, ...], outer: int, dim_size: int, inner: int) -> int:
    """The axis of `shape` that index_select params (outer_count, source_dim_size, inner_count)
    describe (any one of several equivalent extent-1 axes); ValueError if none does."""
    for d in range(len(shape)):
        if (shape[d] == dim_size and math.prod(shape[:d]) == outer
                and math.prod(shape[d + 1:]) == inner):
            return d
    raise ValueError(f"index_select: params outer_count {outer}, source_dim_size {dim_size}, "
                     f"inner_count {inner} do not describe a source of shape {shape}")


def walk_dim(layout: Layout) -> int:
    """The dim whose source stride is smallest (not 0), when it is not the innermost and smaller than
    the innermost's: invocations then walk it, reading along the source's densest dim (a transposed
    source row by row) while neighbours write neighbouring words; -1: walk the innermost."""
    live = [(abs(s), d) for d, (n, s) in enumerate(zip(layout.shape, layout.strides)) if n > 1 and s]
    if not live or not layout.shape:
        return -1
    _, best = min(live, key=lambda sd: (sd[0], -sd[1]))
    last = abs(layout.strides[-1])
    return best if best != layout.ndim - 1 and abs(layout.strides[best]) < last else -1


def _reach(layout: Layout) -> tuple[int, int]:
    """The lowest and highest element a non-empty view touches."""
    pairs = list(zip(layout.shape, layout.strides))
    return (layout.offset + sum(min(0, (n - 1) * s) for n, s in pairs),
            layout.offset + sum(max(0, (n - 1) * s) for n, s in pairs))


def record_strided(batch: Batch, src: DeviceValue, idx: DeviceValue, out: Allocation,
                   status: StatusSlot, dim: int, out_extent: int, gather: bool) -> None:
    """Select along `dim` of `src`'s view into `out` (row-major, the view's shape with `out_extent`
    along `dim`): index_select (`gather` False: `out_extent` indices) or gather (`gather` True:
    the indices have the output's shape)."""
    layout = src.layout if src.layout.ndim else Layout((1,), (1,), src.layout.offset)
    width = src.dtype.itemsize
    dim_size = layout.shape[dim]
    out_shape = (*layout.shape[:dim], out_extent, *layout.shape[dim + 1:])
    n = math.prod(out_shape)
    n_idx = n if gather else out_extent
    require(idx.layout.size >= n_idx, f"strided select: {idx.layout.size} indices for {n_idx}")
    if n == 0:
        return
    if layout.size:  # the view must lie inside the allocation (its layout alone cannot say)
        lo, hi = _reach(layout)
        require(lo >= 0 and (hi + 1) * width <= src.allocation.size,
                 f"strided select: layout {layout} reaches elements {lo}..{hi}, outside the "
                 f"{src.allocation.size // width}-element source")
    flat, d = merge_around(layout, dim)
    if flat.ndim > MAX_STRIDED_RANK:
        src = contiguized(batch, DeviceValue(src.allocation, src.dtype, layout))
        flat, d = merge_around(src.layout, dim)
    word = width
    if not gather and d < flat.ndim - 1:
        flat, word = widen(flat, width)
    rank = flat.ndim
    shape = (*flat.shape[:d], out_extent, *flat.shape[d + 1:])
    words = math.prod(shape)
    pad = MAX_STRIDED_RANK - rank
    # CPUs (the sequential mapping) walk the source's densest dim; GPUs keep one position per step.
    # A gather reads a random source position per element whatever it walks, and walking costs it
    # strided index loads: it walks only its own dim (random reads then stay inside a source row).
    walk = -1 if batch.pool.coalesced else walk_dim(Layout(shape, flat.strides, flat.offset))
    if gather and walk != d:
        walk = -1
    walk_len = 0
    if walk >= 0:  # long walks keep a tile's source rows cached; enough of them for every core
        tiles = words // shape[walk] // shape[-1] * -(-shape[-1] // WALK_LANES) * WALK_LANES
        walk_len = -(-shape[walk] // max(1, min(shape[walk], WALK_INVOCATIONS // max(tiles, 1))))
    values = [src.allocation.address, out.address, idx.allocation.address, status.address, 0,
              flat.offset, *flat.strides, *([0] * pad), *shape, *([1] * pad), dim_size, walk_len]
    ssbo = storage_buffers(batch, src.nbytes, words * word, 4 * n_idx)
    buffers = (bind(src.allocation, src.nbytes), bind(out, words * word), bind(idx.allocation, 4 * n_idx),
               bind(status.allocation, 4, status.offset)) if ssbo else None
    # 32-bit offsets unless some position (or an offset one stride past) may not fit in int32
    wide = words >= I31_LIMIT or src.nbytes // word >= I31_LIMIT // 2
    spec = (*spec_constants(batch, FAMILY, wide, rank), d, int(gather), walk & 0xFFFFFFFF)  # int32 bits
    pipeline = batch.pool.pipelines.get(f"{FAMILY}_w{word}{'_ssbo' if ssbo else ''}", spec)
    if walk < 0:
        batch.dispatch(pipeline, _FORMAT, values, 4, words, per_group(batch, FAMILY), buffers)
        return
    invocations = tiles * -(-shape[walk] // walk_len)
    batch.dispatch(pipeline, _FORMAT, values, 4, invocations, batch.pool.groups[FAMILY][0], buffers)


class StridedIndexSelectKernel(IndexSelectKernel):
    """index_select reading any view of its source (the errors of `IndexSelectKernel`)."""

    family = FAMILY

    def record(self, batch: Batch, step: Any, args: list[DeviceValue], out: Allocation,
               status: StatusSlot | None) -> None:
        src, idx = args
        p = IndexSelectParams.of(step.param)
        outer, dim_size, n_idx, inner = int(p.outer_count), int(p.source_dim_size), int(p.n_indices), \
            int(p.inner_count)
        shape = src.layout.shape or (1,)
        record_strided(batch, src, idx, out, status, index_select_dim(shape, outer, dim_size, inner),
                       n_idx, gather=False)

    def __repr__(self) -> str:
        return "StridedIndexSelectKernel()"


class StridedGatherKernel(GatherKernel):
    """gather reading any view of its source (the errors of `GatherKernel`)."""

    family = FAMILY

    def record(self, batch: Batch, step: Any, args: list[DeviceValue], out: Allocation,
               status: StatusSlot | None) -> None:
        src, idx = args
        src_shape, out_shape, dim = gather_params(step)
        require((src.layout.shape or (1,)) == (src_shape or (1,)),
                 f"gather: source_shape {src_shape} but the source's view has shape {src.layout.shape}")
        record_strided(batch, src, idx, out, status, dim, (out_shape or (1,))[dim], gather=True)

    def __repr__(self) -> str:
        return "StridedGatherKernel()"
