"""The fill kernels: masked_fill, and select_fill (an index_select and the masked_fill of its
result in one dispatch). Both move 16-byte words with a bitwise select and read their BOOL mask
in its own layout (`mask_reading`): a contiguous mask byte for byte, a mask broadcast from a
smaller array (a row mask (N, 1), a column mask (1, C), ...) in place, from each element's row
and column; any other view is contiguized on the device first, in the same command buffer.
Which layouts the planner hands them is their contracts' business (`vulkan.md`,
`vulkan_broadcast.md`)."""

from __future__ import annotations

import math
from typing import Any

from lazyfuel.backends.vulkan.batch import Batch
from lazyfuel.backends.vulkan.compute_pipelines import spirv
from lazyfuel.backends.vulkan.copy_kernels import contiguized
from lazyfuel.backends.vulkan.kernels import (
    U32_LIMIT,
    WIDTHS,
    DeviceValue,
    IndexSelectKernel,
    StatusSlot,
    VulkanKernel,
    bind,
    dispatch,
    per_group,
    require,
    select_rows,
    spec_constants,
    storage_buffers,
)
from lazyfuel.backends.vulkan.mask_reading import DENSE, MaskReading, by_rows, mask_reading
from lazyfuel.backends.vulkan.memory import Allocation
from lazyfuel.dtypes import DType
from lazyfuel.ops import masked_fill as masked_fill_op
from lazyfuel.ops import select_fill as select_fill_op


def readable_mask(batch: Batch, mask: DeviceValue, width: int, n: int,
                  kernel: str) -> tuple[DeviceValue, MaskReading]:
    """The mask as the shaders read it for `n` output elements of `width` bytes: in place where its
    layout allows (`mask_reading`), else contiguized on the device first."""
    require(mask.layout.size >= n, f"{kernel}: the mask holds {mask.layout.size} elements, "
            f"the output {n}")
    reading = mask_reading(mask.layout, width)
    if reading is None:
        mask = contiguized(batch, mask)
        reading = MaskReading(DENSE)
    return mask, reading


def mask_bytes(mask: DeviceValue, reading: MaskReading, words: int, width: int) -> int:
    """The mask bytes the shader may read for `words` 16-byte output words: a dense mask's bytes
    of every word (padding included), a broadcast mask's memory span."""
    return words * (16 // width) if reading.mode == DENSE else mask.nbytes


def mask_wide(reading: MaskReading, words: int, width: int) -> bool:
    """64-bit positions: the words do not fit 32 bits, or (off the dense mode, where the shader
    works out each element's position) the elements do not."""
    return words >= U32_LIMIT or (reading.mode != DENSE and words * (16 // width) >= U32_LIMIT)


class MaskedFillKernel(VulkanKernel):
    """masked_fill: where the BOOL mask is set take `fill_bytes`, else the data element.

    Moves 16-byte words (16 / width elements) with a bitwise select, so narrow dtypes run as fast
    as wide ones; the last word may cover the 16-byte padding past the last element. The mask is
    read in its own layout (`readable_mask`)."""

    family = "masked_fill"

    def record(self, batch: Batch, step: Any, args: list[DeviceValue], out: Allocation,
               status: StatusSlot | None) -> None:
        data, mask = args
        width = data.dtype.itemsize
        pattern = fill_pattern(step, data.dtype)
        n = math.prod(step.out_shape)
        require(data.layout.size >= n, f"masked_fill: data ({data.layout.size}) must hold {n} elements")
        if n == 0:
            return
        mask, reading = readable_mask(batch, mask, width, n, "masked_fill")
        words = -(-n * width // 16)
        push = masked_fill_op.PUSH
        values = push.values(src=data.allocation.address, dst=out.address, aux=mask.allocation.address,
                             status=0, base=0, n=words, fill=pattern, mask_div=reading.divs,
                             mask_ext=reading.exts)
        mask_range = mask_bytes(mask, reading, words, width)
        ssbo = storage_buffers(batch, 16 * words, mask_range)
        dst = bind(out, 16 * words)
        buffers = None
        if ssbo:
            buffers = (bind(data.allocation, 16 * words), dst, bind(mask.allocation, mask_range), dst)
        spec = (*spec_constants(batch, self.family, mask_wide(reading, words, width)), *reading.spec)
        pipeline = self.pipeline(batch, width, spec, ssbo)
        dispatch(batch, pipeline, push, values, words, per_group(batch, self.family), buffers)


def fill_pattern(step: Any, dtype: DType) -> list[int]:
    """A masked_fill step's fill value repeated over 16 bytes, as four u32 push-constant words."""
    fill, width = bytes(masked_fill_op.MaskedFillParams.of(step.param).fill_bytes), dtype.itemsize
    require(len(fill) == width, f"masked_fill: fill_bytes has {len(fill)} bytes; {dtype} needs {width}")
    return memoryview(fill * (16 // width)).cast("I").tolist()


class SelectFillKernel(IndexSelectKernel):
    """index_select, then masked_fill of its result, as one dispatch (`select_fill.comp`): the
    binding of op kind SelectFill that the planner puts in place of such a pair (`planner.fusion`)
    where its contract's conditions hold (rows of whole 16-byte words; a GPU). The selected rows
    never reach device memory. Moves 16-byte words, through device addresses (five buffers: the
    push-descriptor set has four); index errors read as the select's (`IndexSelectKernel`); the
    mask is read in its own layout (`readable_mask`): a row mask costs one byte per word.

    With `row_walk` (the default; specialisation constant 9) each invocation divides once and walks
    its words, carrying row, index position and outer forward, and a mask the same over each output
    row (a row mask (N, 1)) is read by row (constant 10); without it, the general path of five
    runtime divisions per word (kept to be timed against: `benchmarks/probes/w3_kernel_probe.py`).

    With `skip_filled` (the default; constant 11) a 16-byte word the mask covers whole is not read:
    its fill is written alone (off: every word is read, to be timed against). With `loads_first`
    (constant 12) the walk issues every index and mask load of an invocation, then every source
    load, then every store, so that the waits for a mask overlap across its positions. By default
    (None) on GPUs only (the coalesced mapping): on lavapipe the passes cost more than they hide
    (1.3-1.6x the walk in turn at 64 MiB blocks, `benchmarks/probes/w3_kernel_probe.py --narrow`).
    With `mask_tile` (the default; constant 13) the passes read a row mask's bytes for the whole
    workgroup at once into shared memory first: a host mask read in place comes over the link in
    whole sectors instead of a few bytes a subgroup step (decision 109)."""

    family = "select_fill"
    row_walk: bool = True
    skip_filled: bool = True
    loads_first: bool | None = None
    mask_tile: bool = True

    def __init__(self, row_walk: bool | None = None, skip_filled: bool | None = None,
                 loads_first: bool | None = None, mask_tile: bool | None = None) -> None:
        if row_walk is not None:
            self.row_walk = row_walk
        if skip_filled is not None:
            self.skip_filled = skip_filled
        if loads_first is not None:
            self.loads_first = loads_first
        if mask_tile is not None:
            self.mask_tile = mask_tile

    def code(self) -> bytes:
        """The SPIR-V of every width (device addresses only: no storage-buffer variant)."""
        return b"".join(spirv(f"{self.family}_w{w}") for w in WIDTHS)

    def record(self, batch: Batch, step: Any, args: list[DeviceValue], out: Allocation,
               status: StatusSlot | None) -> None:
        """Record out = masked_fill(index_select(source, indices), mask); index errors go to `status`."""
        src, idx, mask = args
        outer, dim, n_idx, row = select_rows(step, src, idx)
        require(row % 16 == 0, f"select_fill: rows of {row} bytes are not 16-byte words")
        width = src.dtype.itemsize
        n = outer * n_idx * (row // 16)
        if n == 0:
            return
        mask, reading = readable_mask(batch, mask, width, n * (16 // width), "select_fill")
        wide = mask_wide(reading, n, width) or outer * dim * (row // 16) >= U32_LIMIT
        per_row = by_rows(reading, row // width) if self.row_walk else None  # runs counted in rows
        runs = per_row or reading
        push = select_fill_op.PUSH
        values = push.values(src=src.allocation.address, dst=out.address, aux=idx.allocation.address,
                             status=status.address, base=0, n=n, fill=fill_pattern(step, src.dtype),
                             mask=mask.allocation.address, R=row // 16, n_idx=n_idx, dim_size=dim,
                             mask_div=runs.divs, mask_ext=runs.exts)
        # launch shape: masked_fill's (the same 16-byte words per invocation)
        passes = batch.pool.coalesced if self.loads_first is None else self.loads_first
        spec = (*spec_constants(batch, "masked_fill", wide), *runs.spec, int(self.row_walk),
                int(per_row is not None), int(self.skip_filled), int(passes), int(self.mask_tile))
        pipeline = batch.pool.pipelines.get(f"{self.family}_w{width}", spec)
        dispatch(batch, pipeline, push, values, n, per_group(batch, "masked_fill"))

    def __repr__(self) -> str:
        off = [f"{name}=False" for name in ("row_walk", "skip_filled", "mask_tile")
               if not getattr(self, name)]
        loads = [] if self.loads_first is None else [f"loads_first={self.loads_first}"]
        return f"SelectFillKernel({', '.join(off + loads)})"
