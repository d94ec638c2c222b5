"""Bad indices and buffer ends: IndexError with value and position, no read outside the source,
no write past the output's (16-byte padded) end.

The kernel-level tests place buffers inside larger allocations whose surroundings hold a guard
pattern: a guard byte showing up in an output would mean a read outside the source; a changed
guard byte after an output would mean a write past its end. Device buffers are rounded up to 16
bytes and kernels may write whole words into that padding (masked_fill moves 16-byte words); the
host only ever gets the real bytes back (see test_vulkan_select).
"""

from __future__ import annotations

import numpy as np
import pytest
from vulkan_helpers import (
    GUARD,
    PAD,
    POISON,
    ProgramBuilder,
    binding,
    padded,
    random_array,
    run_one,
    same_bits,
)
from vulkan_helpers import run_kernel as guarded_run

from lazyfuel.contracts.model import OpKind
from lazyfuel.dtypes import DType
from lazyfuel.planner.program import Step

pytestmark = pytest.mark.usefixtures("memory_mode", "mapping")


@pytest.fixture
def direct(pool):
    if not pool.allocator.direct:
        pytest.skip("guard tests read device memory directly; this device needs staging")
    return pool


def run_kernel(pool, step: Step, inputs: list[np.ndarray], out_nbytes: int):
    """`vulkan_helpers.run_kernel` with the pool's poison in the output."""
    return guarded_run(pool, step, inputs, out_nbytes, POISON)


def assert_guards(region: np.ndarray, nbytes: int) -> None:
    assert (region[:PAD] == GUARD).all(), "bytes before the output changed"
    assert (region[PAD + padded(nbytes):] == GUARD).all(), "bytes past the output's padded end changed"


def test_index_select_bad_index_reads_nothing_and_reports_its_position(direct):
    src = np.arange(12, dtype=np.float32).reshape(4, 3)
    idx = np.array([1, 4, 0, 0xFFFFFFFF, 3], np.uint32)
    step = Step(binding(OpKind.IndexSelect, DType.F32, DType.U32, DType.F32), (0, 1),
                (("outer_count", 1), ("source_dim_size", 4), ("n_indices", 5), ("inner_count", 3)),
                (5, 3), DType.F32)
    region, status = run_kernel(direct, step, [src, idx], 60)
    assert status == 1
    assert_guards(region, 60)
    out = region[PAD:PAD + 60]
    rows = out.reshape(5, 12)
    assert (rows[1] == POISON).all() and (rows[3] == POISON).all(), "a bad index read or wrote something"
    same_bits(rows[[0, 2, 4]].copy().view(np.float32), src[[1, 0, 3]])


def test_gather_bad_index_reads_nothing_and_reports_the_first_position(direct):
    src = np.arange(6, dtype=np.uint8).reshape(2, 3) + 100
    idx = np.array([[1, 0, 2], [1, 9, 1]], np.uint32)  # 2 is bad too (dim 0 has size 2)
    step = Step(binding(OpKind.Gather, DType.U8, DType.U32, DType.U8), (0, 1),
                (("source_shape", (2, 3)), ("output_shape", (2, 3)), ("dim", 0)), (2, 3), DType.U8)
    region, status = run_kernel(direct, step, [src, idx], 6)
    assert status == 2
    assert_guards(region, 6)
    out = region[PAD:PAD + 6]
    assert out[2] == POISON and out[4] == POISON
    assert list(out[[0, 1, 3, 5]]) == [103, 101, 103, 105]


@pytest.mark.parametrize("dtype", [DType.U8, DType.BOOL, DType.F16, DType.BF16], ids=str)
@pytest.mark.parametrize("n", [1, 2, 3, 5, 13, 33])
def test_no_write_past_the_end_for_narrow_dtypes(direct, dtype, n):
    rng = np.random.default_rng(n)
    x = random_array(rng, dtype, (n,))
    w = dtype.itemsize
    idx = rng.integers(0, n, n).astype(np.uint32)
    steps = [
        (Step(binding(OpKind.IndexSelect, dtype, DType.U32, dtype), (0, 1),
              (("outer_count", 1), ("source_dim_size", n), ("n_indices", n), ("inner_count", 1)),
              (n,), dtype),
         [x, idx], x[idx]),
        (Step(binding(OpKind.Gather, dtype, DType.U32, dtype), (0, 1),
              (("source_shape", (n,)), ("output_shape", (n,)), ("dim", 0)), (n,), dtype), [x, idx], x[idx]),
        (Step(binding(OpKind.MaskedFill, dtype, DType.BOOL, dtype), (0, 1), (("fill_bytes", bytes(w)),),
              (n,), dtype), [x, np.zeros(n, bool)], x),
        (Step(binding(OpKind.Contiguize, dtype, dtype), (0,),
              (("shape", (n,)), ("strides", (-1,)), ("offset", n - 1)), (n,), dtype), [x], x[::-1]),
    ]
    for step, inputs, expected in steps:
        region, status = run_kernel(direct, step, inputs, n * w)
        assert status == 0xFFFFFFFF
        assert_guards(region, n * w)
        same_bits(region[PAD:PAD + n * w].copy().view(dtype.numpy), expected)


def test_executor_raises_index_error_naming_value_and_position(executor):
    x = np.arange(20, dtype=np.float64).reshape(4, 5)
    idx = np.array([0, 2, 5, 1], np.uint32)
    b = ProgramBuilder(x, idx)
    out = b.index_select(0, x.shape, DType.F64, 1, 1, 4)
    with pytest.raises(IndexError, match=r"index 5 at position 2 of the indices is out of range for an axis "
                                         r"of size 5"):
        run_one(executor, b, out)
    rows = np.array([[0, 1, 2, 3, 3], [3, 0, 7, 0, 1]], np.uint32)
    b = ProgramBuilder(x, rows)
    out = b.gather(0, x.shape, DType.F64, 0, 1, (2, 5))
    with pytest.raises(IndexError, match=r"index 7 at position \(1, 2\) of the indices is out of range for "
                                         r"dim 0 of size 4"):
        run_one(executor, b, out)


def test_bad_index_computed_on_the_device_is_read_back(executor):
    """The indices of the gather are an intermediate (an index_select of an index table)."""
    x = np.arange(8, dtype=np.uint32).reshape(2, 4)
    table = np.array([[1, 0, 1, 1], [0, 6, 0, 1]], np.uint32)
    pick = np.array([1], np.uint32)
    b = ProgramBuilder(x, table, pick)
    rows = b.index_select(1, table.shape, DType.U32, 0, 2, 1)
    out = b.gather(0, x.shape, DType.U32, 0, rows, (1, 4))
    with pytest.raises(IndexError, match=r"index 6 at position \(0, 1\)"):
        run_one(executor, b, out)


def test_a_good_run_after_a_bad_one(executor):
    x = np.arange(6, dtype=np.uint8)
    with pytest.raises(IndexError):
        b = ProgramBuilder(x, np.array([6], np.uint32))
        run_one(executor, b, b.index_select(0, x.shape, DType.U8, 0, 1, 1))
    b = ProgramBuilder(x, np.array([5, 0], np.uint32))
    same_bits(run_one(executor, b, b.index_select(0, x.shape, DType.U8, 0, 1, 2)), x[[5, 0]])
