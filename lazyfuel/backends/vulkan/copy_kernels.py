"""The copy kernels: Contiguize of any view with the copy shader, or of a dense view as one
vkCmdCopyBuffer (two bindings the planner chooses between by cost), the layout helpers they
and the other kernels share (`collapse`, `widen`, `contiguized`), and `copy_bytes`: a device copy
of a byte range by whichever of the two the device moves faster."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from lazyfuel.backends.vulkan.batch import Batch
from lazyfuel.backends.vulkan.kernels import (
    I31_LIMIT,
    MAX_RANK,
    DeviceValue,
    StatusSlot,
    VulkanKernel,
    bind,
    dispatch,
    per_group,
    require,
    spec_constants,
    storage_buffers,
)
from lazyfuel.backends.vulkan.memory import Allocation
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.ops import contiguize as contiguize_op


def collapse(layout: Layout) -> Layout:
    """The same elements in the same order with extent-1 dims dropped and mergeable dims merged."""
    dims = [(n, s) for n, s in zip(layout.shape, layout.strides) if n != 1]
    merged: list[tuple[int, int]] = []
    for n, s in dims:
        if merged and merged[-1][1] == s * n:
            merged[-1] = (merged[-1][0] * n, s)
        else:
            merged.append((n, s))
    return Layout(tuple(n for n, _ in merged), tuple(s for _, s in merged), layout.offset)


def widen(layout: Layout, width: int) -> tuple[Layout, int]:
    """Move k elements as one wider word (<= 16 bytes) when the innermost dim is dense and every
    stride, the offset and the innermost extent are multiples of k; returns (layout, word width)."""
    if not layout.shape or layout.strides[-1] != 1:
        return layout, width
    k = 16 // width
    while k > 1:
        if (layout.shape[-1] % k == 0 and layout.offset % k == 0
                and all(s % k == 0 for s in layout.strides[:-1])):
            shape = (*layout.shape[:-1], layout.shape[-1] // k)
            strides = (*(s // k for s in layout.strides[:-1]), 1)
            return Layout(shape, strides, layout.offset // k), width * k
        k //= 2
    return layout, width


def contiguize_view(step: Any, src: DeviceValue, kernel: str) -> Layout:
    """The view a Contiguize step copies (its params' shape, strides, offset), checked to lie
    inside `src` (ValueError naming `kernel` and the elements it reaches if not)."""
    p = contiguize_op.ContiguizeParams.of(step.param)
    layout = Layout(tuple(p.shape), tuple(p.strides), int(p.offset))
    if layout.size == 0:
        return layout
    width = src.dtype.itemsize
    lo = layout.offset + sum(min(0, (d - 1) * s) for d, s in zip(layout.shape, layout.strides))
    hi = layout.offset + sum(max(0, (d - 1) * s) for d, s in zip(layout.shape, layout.strides))
    require(lo >= 0 and (hi + 1) * width <= src.nbytes,
            f"{kernel}: layout {layout} reaches elements {lo}..{hi}, outside the "
            f"{src.nbytes // width}-element source")
    return layout


class ContiguizeKernel(VulkanKernel):
    """Copy any strided / offset / reversed / broadcast view, dense ones included, into a
    row-major buffer with the copy shader (a dense view as vkCmdCopyBuffer is `BufferCopyKernel`,
    a binding of its own: the planner chooses between them by measured cost)."""

    family = "contiguize"

    def record(self, batch: Batch, step: Any, args: list[DeviceValue], out: Allocation,
               status: StatusSlot | None) -> None:
        (src,) = args
        layout = contiguize_view(step, src, "contiguize")
        width = src.dtype.itemsize
        n = layout.size
        if n == 0:
            return
        flat = collapse(layout)
        if not flat.shape:  # one element (a 0-d view, or extent-1 dims only): a 1-d walk of one
            flat = Layout((1,), (1,), flat.offset)
        flat, word = widen(flat, width)
        rank = flat.ndim
        require(rank <= MAX_RANK, f"contiguize: {rank} dims after merging (at most {MAX_RANK})")
        pad = MAX_RANK - rank
        # The offset rides in the spare stride slot; at rank 8 there is none and it is folded into
        # the source address, which only device addresses allow.
        ssbo = rank < MAX_RANK and storage_buffers(batch, src.nbytes, n * width)
        start = src.allocation.address + (0 if rank < MAX_RANK else flat.offset * word)
        push = contiguize_op.PUSH
        values = push.values(src=start, dst=out.address, base=0, n=flat.size,
                             shape=(*flat.shape, *([1] * pad)),
                             strides=(*flat.strides, *([flat.offset] if pad else []), *([0] * (pad - 1))))
        buffers = None
        if ssbo:
            dst = bind(out, n * width)
            buffers = (bind(src.allocation, src.nbytes), dst, dst, dst)
        # 32-bit offsets unless some position (or an offset one stride past) may not fit in int32
        wide = rank == MAX_RANK or flat.size >= I31_LIMIT or src.nbytes // word >= I31_LIMIT // 2
        pipeline = self.pipeline(batch, word, spec_constants(batch, self.family, wide, rank), ssbo)
        dispatch(batch, pipeline, push, values, flat.size, per_group(batch, self.family), buffers)


class BufferCopyKernel(VulkanKernel):
    """Contiguize of a dense view (its elements contiguous, row-major, at any start offset) as one
    vkCmdCopyBuffer of its bytes; any other view is refused (the copy shader reads those).
    vkCmdCopyBuffer needs no alignment of its offsets, so any element offset is copied as is."""

    family = "copy_buffer"
    MECHANISM = b"vkCmdCopyBuffer(src, src_offset = offset * width, dst, 0, n * width) v1"

    def code(self) -> bytes:
        """No shader: the revision hashes the mechanism's description (and the contract)."""
        return self.MECHANISM

    def record(self, batch: Batch, step: Any, args: list[DeviceValue], out: Allocation,
               status: StatusSlot | None) -> None:
        (src,) = args
        layout = contiguize_view(step, src, "copy_buffer")
        if layout.size == 0:
            return
        flat = collapse(layout)
        require(not flat.shape or flat.strides == (1,),
                f"copy_buffer: layout {layout} is not dense row-major (strides after merging dims: "
                f"{flat.strides}); only a dense view at a start offset is one vkCmdCopyBuffer "
                f"(the copy shader, kernel contiguize, reads any view)")
        width = src.dtype.itemsize
        batch.copy(src.allocation, flat.offset * width, out, 0, layout.size * width)


def contiguized(batch: Batch, value: DeviceValue) -> DeviceValue:
    """`value`'s view copied into a fresh contiguous allocation of the batch, before a barrier:
    what a kernel does first with an input whose view its shader cannot walk."""
    lay = value.layout
    tmp = batch.alloc(max(lay.size * value.dtype.itemsize, 16))
    step = SimpleNamespace(param={"shape": lay.shape, "strides": lay.strides, "offset": lay.offset})
    ContiguizeKernel().record(batch, step, [value], tmp, None)
    batch.barrier()
    return DeviceValue(tmp, value.dtype, Layout.contiguous(lay.shape))


def copy_bytes(batch: Batch, src: Allocation, src_offset: int, dst: Allocation, dst_offset: int,
               nbytes: int) -> None:
    """Record a device copy of `nbytes` from `src_offset` in `src` to `dst_offset` in `dst`: a
    dispatch of the copy shader where the pool copies that many bytes faster so
    (`pool.shader_copy_min`, from `priors.shader_copy_min`) and both ranges start where a storage
    buffer binds and hold whole 16-byte words; else one vkCmdCopyBuffer. Later work sees it after
    a `batch.barrier()`, either way."""
    least = batch.pool.shader_copy_min
    align = batch.pool.allocator.align
    if (least is None or nbytes < max(least, 16) or nbytes % 16
            or (src.offset + src_offset) % align or (dst.offset + dst_offset) % align):
        batch.copy(src, src_offset, dst, dst_offset, nbytes)
        return
    n = nbytes // 4  # as uint32 words (the shader widens them to 16 bytes)
    source = DeviceValue(src.part(src_offset, nbytes), DType.U32, Layout.contiguous((n,)))
    step = SimpleNamespace(param={"shape": (n,), "strides": (1,), "offset": 0})
    ContiguizeKernel().record(batch, step, [source], dst.part(dst_offset, nbytes), None)

