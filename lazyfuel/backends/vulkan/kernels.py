"""The kernel families: each records the dispatches of one program Step into a Batch.

A kernel object is what a Vulkan `KernelRef.impl` holds. `record(batch, step, args, out, status)`
gets the step, its arguments as `DeviceValue`s (allocation + dtype + layout, the layout relative
to the start of the allocation), the output allocation (contiguous, rounded up to 16 bytes) and a
status slot for kernels that check indices. It validates the step's params against the buffers in
readable code, then calls the hot path. Elements are moved as unsigned words of their width, so
every dtype of a width shares one shader; `code()` is the SPIR-V hashed into the revision.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any, ClassVar

from lazyfuel.backends.vulkan.batch import Batch
from lazyfuel.backends.vulkan.compute_pipelines import spirv
from lazyfuel.backends.vulkan.memory import Allocation
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.ops import gather as gather_op
from lazyfuel.ops import index_select as index_select_op
from lazyfuel.ops.push import PushLayout
from lazyfuel.settings import config

WIDTHS = (1, 2, 4, 8, 16)
# Each family's workgroup size and elements (or words) per invocation come from the pool
# (`pool.groups`, chosen per device kind in launch_shapes.py); benchmarks/probes/select_tuning.py and
# benchmarks/probes/kernels_gpu.py measure the choices. Gather's quads need elements a multiple of 4.
# gather moves quads of 4 consecutive outputs per step on GPUs (specialisation constant 5); the
# `gather_scalar` binding (`GatherKernel(quads=False)`, contracts/vulkan_variants.md) moves one.
MAX_RANK = 8
U32_LIMIT = 1 << 32  # positions from here on need the shaders' 64-bit (WIDE) arithmetic
I31_LIMIT = 1 << 31  # the same for signed offsets (contiguize)


@dataclass(frozen=True)
class DeviceValue:
    """A value on the device: its bytes, dtype, and layout (relative to the allocation's start)."""

    allocation: Allocation
    dtype: DType
    layout: Layout

    @property
    def nbytes(self) -> int:
        """Bytes of the allocation that hold data (its size may be larger)."""
        return self.layout.span * self.dtype.itemsize


STATUS_STRIDE = 256  # bytes between status slots: the largest minStorageBufferOffsetAlignment


@dataclass(frozen=True)
class StatusSlot:
    """A 32-bit word where a kernel records the first bad index position (0xFFFFFFFF: none).

    Slots sit STATUS_STRIDE bytes apart so each can be bound as a storage buffer of its own."""

    allocation: Allocation
    index: int

    @property
    def offset(self) -> int:
        return STATUS_STRIDE * self.index

    @property
    def address(self) -> int:
        return self.allocation.address + self.offset


def bind(allocation: Allocation, nbytes: int, offset: int = 0) -> tuple:
    """(VkBuffer, offset, range) binding `nbytes` of `allocation` from `offset` (range rounded up
    to 16 bytes inside the allocation, at least 16)."""
    size = min(max(-(-nbytes // 16) * 16, 16), allocation.size - offset)
    return (allocation.buffer, allocation.offset + offset, size)


def storage_buffers(batch: Batch, *nbytes: int) -> bool:
    """Use the storage-buffer shaders: the pool has them and every range fits the device's limit."""
    pool = batch.pool
    return pool.ssbo and all(-(-n // 16) * 16 <= pool.info.max_storage_buffer_range for n in nbytes)


# `lazyfuel.config._force_wide`: tests run the shaders' 64-bit position arithmetic on small data
# (every kernel takes it by itself where sizes need it: a switch of the data, not a binding).


def spec_constants(batch: Batch, family: str, wide: bool, rank: int = 1,
                   quads: bool = True) -> tuple[int, ...]:
    """Specialisation constants 0-4: workgroup size, elements per invocation, 64-bit positions,
    rank (contiguize), coalesced mapping of positions to invocations (GPUs); gather adds 5: quads."""
    local, elems = batch.pool.groups[family]
    spec = (local, elems, int(wide or config._force_wide), rank, int(batch.pool.coalesced))
    return (*spec, int(quads)) if family == "gather" else spec


def per_group(batch: Batch, family: str) -> int:
    """Items one workgroup of `family` moves on the batch's device."""
    local, elems = batch.pool.groups[family]
    return local * elems


def family_code(family: str) -> bytes:
    """The SPIR-V of every variant of the shader `family` (each width, both memory modes)."""
    return b"".join(spirv(f"{family}_w{w}{mode}") for w in WIDTHS for mode in ("", "_ssbo"))


def family_revision(family: str) -> str:
    """A short hash of `family_code`: what the judge's launch-shape picks are keyed by."""
    return hashlib.sha256(family_code(family)).hexdigest()[:16]


def _widest_word(nbytes: int) -> int:
    """The widest of 16, 8, 4, 2, 1 bytes dividing `nbytes`."""
    return next(w for w in (16, 8, 4, 2, 1) if nbytes % w == 0)


def require(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


class VulkanKernel:
    """Shared parts: the SPIR-V family name and the revision bytes."""

    family: ClassVar[str]
    checks_indices: ClassVar[bool] = False

    def code(self) -> bytes:
        """The bytes of every variant this kernel may run (for the revision hash)."""
        return family_code(self.family)

    def pipeline(self, batch: Batch, width: int, spec: tuple[int, ...], ssbo: bool) -> Any:
        return batch.pool.pipelines.get(f"{self.family}_w{width}{'_ssbo' if ssbo else ''}", spec)

    def record(self, batch: Batch, step: Any, args: list[DeviceValue], out: Allocation,
               status: StatusSlot | None) -> None:
        raise NotImplementedError

    def index_error(self, step: Any, position: int, value: int) -> IndexError:
        """The error for a bad index `value` at `position` of the step's indices."""
        return IndexError(f"index {value} at position {position} is out of range")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def dispatch(batch: Batch, pipeline: Any, push: PushLayout, values: list[Any], n_items: int,
             items_per_group: int, buffers: tuple | None = None) -> None:
    """`batch.dispatch` of values packed by the shader's push-constant layout `push`."""
    batch.dispatch(pipeline, push.format, values, push.base_slot, n_items, items_per_group, buffers)


class IndexSelectKernel(VulkanKernel):
    """index_select as a row copy: rows of `inner_count` elements moved as the widest words; with
    `aligned_rows`, a straight row copy where each invocation's words lie in one row (sequential
    mapping: specialisation constant 5), else always the general path (the `index_select_general`
    binding, which tests and benchmarks pin to run and time it)."""

    family = "index_select"
    checks_indices = True

    def __init__(self, dtype: DType | None = None, aligned_rows: bool = True) -> None:
        self.dtype = dtype  # the wrapper's dtype (None: dtype-agnostic)
        self.aligned_rows = aligned_rows

    def record(self, batch: Batch, step: Any, args: list[DeviceValue], out: Allocation,
               status: StatusSlot | None) -> None:
        src, idx = args
        outer, dim, n_idx, row = select_rows(step, src, idx)
        width = src.dtype.itemsize
        word = _widest_word(row) if row else width
        words_per_row = row // word
        n = outer * n_idx * words_per_row
        if n == 0:
            return
        push = index_select_op.PUSH
        values = push.values(src=src.allocation.address, dst=out.address, aux=idx.allocation.address,
                             status=status.address, base=0, n=n, R=words_per_row, n_idx=n_idx, dim_size=dim)
        src_bytes, out_bytes = outer * dim * row, n * word
        ssbo = storage_buffers(batch, src_bytes, out_bytes, 4 * n_idx)
        buffers = (bind(src.allocation, src_bytes), bind(out, out_bytes), bind(idx.allocation, 4 * n_idx),
                   bind(status.allocation, 4, status.offset)) if ssbo else None
        wide = n >= U32_LIMIT or src_bytes // word >= U32_LIMIT
        # 5: each invocation's words lie in one row (sequential mapping, rows a multiple of them)
        aligned = (self.aligned_rows and not batch.pool.coalesced
                   and words_per_row % batch.pool.groups[self.family][1] == 0)
        spec = (*spec_constants(batch, self.family, wide), int(aligned))
        pipeline = self.pipeline(batch, word, spec, ssbo)
        dispatch(batch, pipeline, push, values, n, per_group(batch, self.family), buffers)

    def index_error(self, step: Any, position: int, value: int) -> IndexError:
        dim = index_select_op.IndexSelectParams.of(step.param).source_dim_size
        return IndexError(f"index_select: index {value} at position {position} of the indices is out "
                          f"of range for an axis of size {dim}")

    def __repr__(self) -> str:
        general = "" if self.aligned_rows else ", general"
        return f"IndexSelectKernel({self.dtype or 'any'}{general})"


def select_rows(step: Any, src: DeviceValue, idx: DeviceValue) -> tuple[int, int, int, int]:
    """An index_select step's (outer, source_dim_size, n_indices, row bytes), checked against its
    source and indices (ValueError if they are too small)."""
    p = index_select_op.IndexSelectParams.of(step.param)
    outer, dim, n_idx = int(p.outer_count), int(p.source_dim_size), int(p.n_indices)
    inner = int(p.inner_count)
    row = inner * src.dtype.itemsize
    require(src.nbytes >= outer * dim * row,
             f"index_select: source holds {src.nbytes} bytes, params need {outer * dim * row}")
    require(idx.layout.size >= n_idx, f"index_select: {idx.layout.size} indices, params say {n_idx}")
    return outer, dim, n_idx, row


def gather_params(step: Any) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """A gather step's (source_shape, output_shape, dim), checked to agree (ValueError if not)."""
    p = gather_op.GatherParams.of(step.param)
    src_shape, out_shape, dim = tuple(p.source_shape), tuple(p.output_shape), int(p.dim)
    require(len(src_shape) == len(out_shape) and 0 <= dim < max(len(src_shape), 1),
             f"gather: source_shape {src_shape}, output_shape {out_shape} and dim {dim} disagree")
    require(all(a == b for i, (a, b) in enumerate(zip(src_shape, out_shape)) if i != dim),
             f"gather: output_shape {out_shape} must equal source_shape {src_shape} except on dim {dim}")
    return src_shape, out_shape, dim


class GatherKernel(VulkanKernel):
    """gather along `dim`: out[o, m, k] = src[o, idx[o, m, k], k]; with `quads` (GPUs) each step
    moves 4 consecutive outputs, else one (the `gather_scalar` binding)."""

    family = "gather"
    checks_indices = True

    def __init__(self, quads: bool = True) -> None:
        self.quads = quads

    def record(self, batch: Batch, step: Any, args: list[DeviceValue], out: Allocation,
               status: StatusSlot | None) -> None:
        src, idx = args
        src_shape, out_shape, dim = gather_params(step)
        shape_src = src_shape or (1,)
        shape_out = out_shape or (1,)
        n = math.prod(shape_out)
        width = src.dtype.itemsize
        require(src.nbytes >= math.prod(shape_src) * width, "gather: source smaller than source_shape")
        require(idx.layout.size >= n, f"gather: {idx.layout.size} indices for {n} outputs")
        if n == 0:
            return
        inner = math.prod(shape_out[dim + 1:])
        push = gather_op.PUSH
        values = push.values(src=src.allocation.address, dst=out.address, aux=idx.allocation.address,
                             status=status.address, base=0, n=n, inner=inner, M=shape_out[dim],
                             S=shape_src[dim])
        src_bytes = math.prod(shape_src) * width
        ssbo = storage_buffers(batch, src_bytes, n * width, 4 * n)
        buffers = (bind(src.allocation, src_bytes), bind(out, n * width), bind(idx.allocation, 4 * n),
                   bind(status.allocation, 4, status.offset)) if ssbo else None
        wide = n >= U32_LIMIT or src_bytes // width >= U32_LIMIT
        spec = spec_constants(batch, self.family, wide, quads=self.quads)
        pipeline = self.pipeline(batch, width, spec, ssbo)
        dispatch(batch, pipeline, push, values, n, per_group(batch, self.family), buffers)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({'' if self.quads else 'quads=False'})"

    def index_error(self, step: Any, position: int, value: int) -> IndexError:
        p = gather_op.GatherParams.of(step.param)
        shape, dim = tuple(p.output_shape) or (1,), int(p.dim)
        # positions read as the host check writes them: an int for 1-d indices, a tuple for n-d
        where = position if len(shape) == 1 else tuple(int(i) for i in _unravel(position, shape))
        size = (tuple(p.source_shape) or (1,))[dim]
        return IndexError(f"gather: index {value} at position {where} of the indices is out of range "
                          f"for dim {dim} of size {size}")


def _unravel(position: int, shape: tuple[int, ...]) -> list[int]:
    coords = []
    for n in reversed(shape):
        coords.append(position % n)
        position //= n
    return coords[::-1]
