"""The two Contiguize bindings on dense views (`vulkan_copy.md`'s vkCmdCopyBuffer and `vulkan.md`'s
copy shader, which walks dense views too): bit-exact against numpy for every dtype, odd sizes and
start offsets, on poisoned output buffers; the buffer copy refuses any view that is not dense."""

from __future__ import annotations

import numpy as np
import pytest
from vulkan_helpers import ALL_DTYPES, random_array, same_bits

from lazyfuel.backends.vulkan.copy_kernels import BufferCopyKernel, ContiguizeKernel
from lazyfuel.backends.vulkan.kernels import DeviceValue
from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.planner.program import Program, Step
from lazyfuel.providers import default_registry
from lazyfuel.registry import Binding

pytestmark = pytest.mark.usefixtures("memory_mode")

COPY, SHADER = "vulkan-copy-buffer", "lazyfuel-glsl"
MIB = 1 << 20


def contiguize_binding(source: str, dtype: DType) -> Binding:
    return next(b for b in default_registry().bindings() if b.op_kind is OpKind.Contiguize
                and b.backend is Backend.Vulkan and b.dtypes[0] is dtype and b.kernel_source == source)


def within(base: np.ndarray, view: np.ndarray) -> Layout:
    """`view`'s layout relative to the start of the contiguous array `base` it looks into."""
    width = base.dtype.itemsize
    start = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    return Layout(view.shape, tuple(s // width for s in view.strides), start // width if view.size else 0)


def run(executor, source: str, base: np.ndarray, view: np.ndarray | None = None) -> np.ndarray:
    """Contiguize `view` (default: all of `base`), a view into the contiguous `base`, with the
    binding of kernel source `source`: one step whose params locate the view in `base`'s buffer,
    as a plan's step does for a view the chain takes of an input."""
    view = base if view is None else view
    dtype = DType.from_numpy(base.dtype)
    lay = within(base, view)
    step = Step(contiguize_binding(source, dtype), (0,),
                (("shape", lay.shape), ("strides", lay.strides), ("offset", lay.offset)), lay.shape, dtype)
    (out,) = executor.run(Program((dtype,), (Layout.of(base),), (step,), (1,)), [base])
    return out


def dense_views(rng: np.random.Generator, dtype: DType) -> list[tuple[np.ndarray, np.ndarray]]:
    """(base, dense view into it) at start offsets: odd sizes, offsets that are and are not
    multiples of 16 bytes, a block of rows, a single element, extent-1 dims, the whole array."""
    flat = random_array(rng, dtype, (1031,))
    grid = random_array(rng, dtype, (13, 7, 5))
    return [(flat, flat[3:]), (flat, flat[1:1000]), (flat, flat[16:33]), (flat, flat[1030:]),
            (grid, grid[2:9]), (grid, grid[4:5, :, :]), (grid, grid[5:6, 2:3]),
            (flat, flat[7:8].reshape(1, 1)), (flat, flat), (grid, grid)]


@pytest.mark.parametrize("source", [COPY, SHADER])
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_dense_views_at_any_offset_are_copied_bit_for_bit(executor, source, dtype):
    rng = np.random.default_rng(hash((source, dtype.name)) % 2**32)
    offsets = set()
    for base, view in dense_views(rng, dtype):
        lay = within(base, view)
        assert not lay.is_strided and not lay.has_reverse_strides
        offsets.add(lay.offset)
        same_bits(run(executor, source, base, view), np.ascontiguousarray(view))
    assert {0, 3, 16, 1030} <= offsets


@pytest.mark.parametrize("source", [COPY, SHADER])
def test_empty_and_zero_d_dense_views(executor, source):
    rng = np.random.default_rng(5)
    same_bits(run(executor, source, random_array(rng, DType.F32, (4, 0, 3))), np.empty((4, 0, 3), np.float32))
    scalar = random_array(rng, DType.C128, ())
    same_bits(run(executor, source, scalar), scalar)


@pytest.mark.parametrize("view", ["transposed", "step2", "reversed", "broadcast"])
def test_the_buffer_copy_refuses_views_that_are_not_dense(executor, view):
    a = np.arange(60, dtype=np.float32).reshape(6, 10)
    awkward = {"transposed": a.T, "step2": a[:, ::2], "reversed": a[::-1],
               "broadcast": np.broadcast_to(a[:1], (4, 10))}[view]
    base = a[:1] if view == "broadcast" else a  # the storage the view looks into
    prop = {"transposed": "strided", "step2": "strided", "reversed": "reverse_strides",
            "broadcast": "broadcast_stride0"}[view]
    with pytest.raises(ValueError, match=rf"argument 0 has layout .*\({prop}: rejected\); copy it with a "
                                         r"Contiguize binding whose caps accept it \(the copy shader"):
        run(executor, COPY, base, awkward)
    same_bits(run(executor, SHADER, base, awkward), np.ascontiguousarray(awkward))


def test_the_buffer_copy_kernel_checks_density_and_span_itself(executor, pool):
    """Recorded directly (past the executor's caps check), the kernel still refuses a strided view
    and one reaching outside its source."""
    a = np.arange(24, dtype=np.float32)
    dt = DType.F32
    binding = contiguize_binding(COPY, dt)
    assert isinstance(binding.kernel_ref.impl, BufferCopyKernel)
    assert isinstance(contiguize_binding(SHADER, dt).kernel_ref.impl, ContiguizeKernel)
    strided = Step(binding, (0,), (("shape", (4, 3)), ("strides", (1, 4)), ("offset", 0)), (4, 3), dt)
    outside = Step(binding, (0,), (("shape", (20,)), ("strides", (1,)), ("offset", 5)), (20,), dt)
    with pool.batch() as batch:
        src = DeviceValue(batch.alloc(a.nbytes), dt, Layout.of(a))
        out = batch.alloc(a.nbytes)
        with pytest.raises(ValueError, match=r"copy_buffer: layout .* is not dense row-major \(strides "
                                             r"after merging dims: \(1, 4\)\)"):
            binding.kernel_ref.impl.record(batch, strided, [src], out, None)
        with pytest.raises(ValueError, match=r"copy_buffer: layout .* reaches elements 5\.\.24, outside "
                                             r"the 24-element source"):
            binding.kernel_ref.impl.record(batch, outside, [src], out, None)


@pytest.mark.slow
@pytest.mark.parametrize("source", [COPY, SHADER])
def test_a_dense_view_past_128_mib(executor, pool, source):
    """A 136 MiB source (past lavapipe's maxStorageBufferRange: the shader runs on device addresses),
    copied from an odd offset so bytes past the first 128 MiB are copied too."""
    x = np.random.default_rng(6).integers(0, 2**32, 34 * MIB, dtype=np.uint32).view(np.float32)
    try:
        view = x[5:]
        same_bits(run(executor, source, x, view), view.copy())
    finally:
        pool.allocator.trim()
