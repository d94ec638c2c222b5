"""An index_select whose only reader is a masked_fill runs as one `select_fill` dispatch
(executor.select_fills): bit-equal to numpy and to the two kernels it replaces, for every dtype,
rank and dim whose rows are whole 16-byte words, with broadcast masks through a Contiguize step,
64-bit positions, outputs in place and in zero-copy host memory; bad indices are reported as the
select's, with nothing returned; pairs it cannot take run as two dispatches."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from vulkan_helpers import ALL_DTYPES, ProgramBuilder, random_array, same_bits

import lazyfuel as lf
from lazyfuel import profiling
from lazyfuel.backends.vulkan.executor import select_fills
from lazyfuel.dtypes import DType


@pytest.fixture(params=[True, False], ids=["fused", "two-kernels"])
def fuse(request):
    with lf.config(_fuse_select_fill=request.param):
        yield request.param


def fill_bytes(dtype: DType, rng: np.random.Generator) -> tuple[bytes, np.ndarray]:
    value = random_array(rng, dtype, (1,))
    return value.tobytes(), value


def expected(x: np.ndarray, dim: int, idx: np.ndarray, mask: np.ndarray, value: np.ndarray) -> np.ndarray:
    picked = np.take(x.view(f"V{x.dtype.itemsize}"), idx.astype(np.int64), axis=dim)
    return np.where(mask, value.view(f"V{x.dtype.itemsize}")[0], picked).view(x.dtype)


def rows_case(seed: int, dtype: DType, shape: tuple[int, int], n_idx: int, density: float = 0.5):
    """Random rows `x`, row indices, an (n_idx, cols) mask set with `density`, a fill value."""
    rng = np.random.default_rng(seed)
    x = random_array(rng, dtype, shape)
    idx = rng.integers(0, shape[0], n_idx).astype(np.uint32)
    mask = rng.random((n_idx, shape[1])) < density
    return (x, idx, mask, *fill_bytes(dtype, rng))


def select_then_fill(x: np.ndarray, dim: int, idx: np.ndarray, mask: np.ndarray, fill: bytes,
                     outputs: str = "fill") -> tuple[ProgramBuilder, tuple[int, ...]]:
    dt = DType.from_numpy(x.dtype)
    b = ProgramBuilder(x, idx, mask)
    picked = b.index_select(0, x.shape, dt, dim, 1, idx.size)
    shape = b.steps[-1].out_shape
    m = b.input(2)  # a broadcast mask goes through a Contiguize step
    filled = b.masked_fill(picked, shape, dt, m, fill)
    return b, (filled,) if outputs == "fill" else (picked, filled)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_every_dtype_fused_and_bit_equal(executor, fuse, dtype):
    rng = np.random.default_rng(int.from_bytes(dtype.name.encode(), "little") % 2**32)
    inner = max(1, 64 // dtype.itemsize)  # 64-byte rows: whole 16-byte words for every width
    x = random_array(rng, dtype, (3, 7, inner))
    idx = rng.integers(0, 7, 11).astype(np.uint32)
    mask = rng.random((3, 11, inner)) < 0.5
    fill, value = fill_bytes(dtype, rng)
    b, outs = select_then_fill(x, 1, idx, mask, fill)
    with lf.profile() as p:
        (got,) = executor.run(b.program(outs), b.inputs)
    same_bits(got, expected(x, 1, idx, mask, value))
    assert p.dispatches == (1 if fuse else 2)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_shapes_dims_and_broadcast_masks(executor, data):
    with lf.config(_fuse_select_fill=True):
        dtype = data.draw(st.sampled_from(ALL_DTYPES))
        rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
        ndim = data.draw(st.integers(1, 3))
        shape = tuple(data.draw(st.integers(1, 5)) for _ in range(ndim))
        dim = data.draw(st.integers(0, ndim - 1))
        words = data.draw(st.integers(0, 3))  # rows of whole words (fused) or not (two kernels)
        row = math.prod(shape[dim + 1:]) * dtype.itemsize
        if words and dim == ndim - 1:
            shape = (*shape, 16 * words // dtype.itemsize)  # the last axis makes 16-byte rows
        elif words and row % 16:
            shape = (*shape[:-1], shape[-1] * 16 // math.gcd(row, 16))
        x = random_array(rng, dtype, shape)
        idx = rng.integers(0, shape[dim], data.draw(st.integers(1, 9))).astype(np.uint32)
        out_shape = (*shape[:dim], idx.size, *shape[dim + 1:])
        mshape = tuple(1 if data.draw(st.booleans()) else n for n in out_shape)
        mask = np.broadcast_to(rng.random(mshape) < 0.5, out_shape)
        fill, value = fill_bytes(dtype, rng)
        b, outs = select_then_fill(x, dim, idx, mask, fill)
        program = b.program(outs)
        fusable = math.prod(shape[dim + 1:]) * dtype.itemsize % 16 == 0
        assert bool(select_fills(program, [s.binding.kernel_ref.impl for s in program.steps],
                                 executor.pool)) == fusable
        (got,) = executor.run(program, b.inputs)
        same_bits(got, expected(x, dim, idx, np.ascontiguousarray(mask), value))


def test_sixty_four_bit_positions(executor, fuse):
    with lf.config(_force_wide=True):
        x, idx, mask, fill, value = rows_case(5, DType.F16, (40, 24), 33, density=0.3)
        b, outs = select_then_fill(x, 0, idx, mask, fill)
        (got,) = executor.run(b.program(outs), b.inputs)
        same_bits(got, expected(x, 0, idx, mask, value))


def test_a_bad_index_is_the_selects_error_and_nothing_comes_back(executor, fuse):
    x = np.arange(4 * 8, dtype=np.float32).reshape(4, 8)
    idx = np.array([0, 3, 9, 1, 2], np.uint32)
    mask = np.zeros((5, 8), np.bool_)
    b, outs = select_then_fill(x, 0, idx, mask, np.float32(2).tobytes())
    out = np.full((5, 8), np.nan, np.float32)
    with pytest.raises(IndexError, match=r"index_select: index 9 at position 2 of the indices is out of "
                                         r"range for an axis of size 4"):
        executor.run(b.program(outs), b.inputs, out=[out])
    idx[2] = 2  # and the next run is fine
    (got,) = executor.run(b.program(outs), b.inputs)
    same_bits(got, x[idx])


def test_pairs_it_cannot_take_run_as_two_kernels(executor):
    with lf.config(_fuse_select_fill=True):
        x, idx, mask, fill, value = rows_case(9, DType.F32, (6, 4), 5)
        # the select's result is also returned: it must be written
        b, outs = select_then_fill(x, 0, idx, mask, fill, outputs="both")
        with lf.profile() as p:
            picked, filled = executor.run(b.program(outs), b.inputs)
        assert p.dispatches == 2
        same_bits(picked, x[idx])
        same_bits(filled, expected(x, 0, idx, mask, value))
        # rows of 12 bytes are not whole 16-byte words
        x3 = random_array(np.random.default_rng(10), DType.F32, (6, 3))
        mask3 = np.ascontiguousarray(mask[:, :3])
        b, outs = select_then_fill(x3, 0, idx, mask3, fill)
        with lf.profile() as p:
            (got,) = executor.run(b.program(outs), b.inputs)
        assert p.dispatches == 2
        same_bits(got, expected(x3, 0, idx, mask3, value))


def test_into_out_arrays_and_page_locked_memory(executor, fuse):
    rng = np.random.default_rng(13)
    x = lf.empty_pinned((64, 32), np.float32)
    x[...] = random_array(rng, DType.F32, (64, 32))
    idx = rng.permutation(64).astype(np.uint32)
    mask = np.broadcast_to(rng.random((64, 1)) < 0.5, (64, 32))
    fill, value = fill_bytes(DType.F32, rng)
    b, outs = select_then_fill(x, 0, idx, mask, fill)
    want = expected(np.asarray(x), 0, idx, np.ascontiguousarray(mask), value)
    for out in (np.full((64, 32), np.nan, np.float32), lf.empty_pinned((64, 32), np.float32)):
        out[...] = np.nan
        (got,) = executor.run(b.program(outs), b.inputs, out=[out])
        assert got is out
        same_bits(got, want)


def test_the_lazy_pipeline_counts_one_dispatch_fewer(vulkan):
    rng = np.random.default_rng(17)
    a = rng.standard_normal((64, 16)).astype(np.float32)
    idx = rng.integers(0, 64, 48)
    mask = rng.random((48, 1)) < 0.5
    y = lf.masked_fill(lf.index_select(lf.from_array(a, chunks=(16, 16)), 0, idx), mask, -1.0)
    counts = {}
    for fused in (False, True):
        with lf.config(_fuse_select_fill=fused), profiling.profile() as p:
            got = y.compute()
        counts[fused] = (p.dispatches, p.submits)
        same_bits(got, np.where(mask, np.float32(-1), a[idx]))
    blocks = len(y.chunks[0])
    assert counts[False][0] - counts[True][0] == blocks  # one dispatch fewer per block
    assert counts[False][1] == counts[True][1] == blocks  # one submit per block either way
