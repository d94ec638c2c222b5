"""`VulkanExecutor.run(out=)`: results land in the caller's arrays, in every transfer mode.

The destination is poisoned first, so an element the device did not write shows up; the array
returned is the destination itself; wrong destinations are refused before anything runs."""

from __future__ import annotations

import numpy as np
import pytest
from vulkan_helpers import ProgramBuilder, random_array, same_bits

from lazyfuel.backends.vulkan.memory import VulkanAllocator
from lazyfuel.backends.vulkan.memtypes import Mode
from lazyfuel.dtypes import DType


@pytest.fixture(params=[m.value for m in Mode])
def mode(request, pool):
    """The pool's allocator replaced by one in each transfer mode the device supports (every
    array imported, however small, where the mode imports)."""
    try:
        allocator = VulkanAllocator(pool.device, pool.physical, pool.info, mode=request.param)
    except ValueError as err:
        pytest.skip(str(err))
    allocator.import_min, allocator.poison = 0, pool.allocator.poison
    saved, pool.allocator = pool.allocator, allocator
    try:
        yield allocator.mode
    finally:
        pool.allocator = saved
        allocator.destroy()


def _chain(rng: np.random.Generator, dtype: DType, rows: int):
    x = random_array(rng, dtype, (300, 64))
    idx = rng.integers(0, 300, rows).astype(np.uint32)
    mask = rng.integers(0, 2, (rows, 64)).astype(bool)
    fill = np.zeros((), dtype.numpy).tobytes()
    b = ProgramBuilder(x, idx, mask)
    selected = b.index_select(0, x.shape, dtype, 0, 1, rows)
    filled = b.masked_fill(selected, (rows, 64), dtype, 2, fill)
    want = np.where(mask, np.zeros((), dtype.numpy), x[idx])
    return b, selected, filled, x[idx], want


@pytest.mark.parametrize("dtype", [DType.F32, DType.U8, DType.F64, DType.BF16])
def test_results_land_in_the_arrays_given(executor, mode, dtype):
    rng = np.random.default_rng(3)
    b, _, filled, _, want = _chain(rng, dtype, 128)
    dest = np.full(want.nbytes, 0x5A, np.uint8).view(dtype.numpy).reshape(want.shape)  # poisoned
    (got,) = executor.run(b.program((filled,)), b.inputs, out=[dest])
    assert got is dest
    same_bits(dest, want)


def test_a_region_of_a_larger_array_and_a_mix_of_outputs(executor, mode):
    """Two outputs: the intermediate into rows of a bigger array, the result fresh (None)."""
    rng = np.random.default_rng(4)
    b, selected, filled, rows, want = _chain(rng, DType.F32, 64)
    big = np.full((3, 64, 64), np.float32(7.5))
    got_rows, got = executor.run(b.program((selected, filled)), b.inputs, out=[big[1], None])
    assert np.shares_memory(got_rows, big)
    same_bits(big[1], rows)
    same_bits(got, want)
    assert (big[0] == 7.5).all() and (big[2] == 7.5).all(), "nothing written outside the region"


def test_wrong_destinations_are_refused(executor):
    rng = np.random.default_rng(5)
    b, _, filled, _, want = _chain(rng, DType.F32, 16)
    program = b.program((filled,))
    with pytest.raises(ValueError, match=r"out= has 2 entries, the program has 1 outputs"):
        executor.run(program, b.inputs, out=[None, None])
    with pytest.raises(TypeError, match=r"out\[0\] must be a numpy array of F32"):
        executor.run(program, b.inputs, out=[np.empty(want.shape, np.float64)])
    with pytest.raises(ValueError, match=r"must be a writeable C-contiguous array of shape \(16, 64\)"):
        executor.run(program, b.inputs, out=[np.empty((64, 16), np.float32).T])
    with pytest.raises(ValueError, match=r"shape \(16, 64\); got shape \(16, 63\)"):
        executor.run(program, b.inputs, out=[np.empty((16, 63), np.float32)])
