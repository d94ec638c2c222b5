"""Contiguize on the device: every dtype and kind of view, bit-exact against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from vulkan_helpers import (
    ALL_DTYPES,
    VIEW_KINDS,
    ProgramBuilder,
    binding,
    make_view,
    random_array,
    run_one,
    same_bits,
)

from lazyfuel.backends.vulkan.copy_kernels import collapse, widen
from lazyfuel.contracts.model import OpKind
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.planner.program import Program, Step

pytestmark = pytest.mark.usefixtures("memory_mode")

SHAPES = [(7,), (3, 5), (2, 3, 5), (2, 1, 3, 5)]


def contiguize(executor, a: np.ndarray) -> np.ndarray:
    builder = ProgramBuilder(a)
    return run_one(executor, builder, builder.contiguize(0))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("kind", VIEW_KINDS)
def test_every_view_kind_and_rank(executor, dtype, kind):
    rng = np.random.default_rng(hash((dtype.name, kind)) % 2**32)
    for shape in SHAPES:
        a = make_view(rng, dtype, shape, kind)
        same_bits(contiguize(executor, a), np.ascontiguousarray(a))


@pytest.mark.parametrize("dtype", [DType.U8, DType.F16, DType.F32, DType.F64, DType.C128], ids=str)
def test_mixed_views(executor, dtype):
    rng = np.random.default_rng(7)
    base = random_array(rng, dtype, (6, 9, 10))
    views = [base.transpose(2, 0, 1)[::-3, 1:, ::2], base[1:, ::-2, 3:7].swapaxes(0, 1),
             np.broadcast_to(base[:1, 2:3, :], (4, 9, 3, 10))[:, ::2, :, ::-1],
             base[:, :, 1:9].reshape(6, 9, 2, 4)[..., 1:3]]
    for v in views:
        same_bits(contiguize(executor, v), np.ascontiguousarray(v))


@pytest.mark.parametrize("dtype", [DType.U8, DType.BF16, DType.U32, DType.I64], ids=str)
def test_rank_up_to_eight(executor, dtype):
    rng = np.random.default_rng(8)
    base = random_array(rng, dtype, (2, 3, 2, 3, 2, 3, 2, 5))
    view = base.transpose(7, 6, 5, 4, 3, 2, 1, 0)[::-1, :, ::2, :, ::-1, ::2, :, ::-1]
    same_bits(contiguize(executor, view), np.ascontiguousarray(view))


@pytest.mark.parametrize("dtype", [DType.U8, DType.F16, DType.F64], ids=str)
def test_empty_and_zero_d(executor, dtype):
    rng = np.random.default_rng(9)
    empty = random_array(rng, dtype, (3, 0, 4))
    same_bits(contiguize(executor, empty), empty)
    same_bits(contiguize(executor, random_array(rng, dtype, (5, 4))[::-1, 4:]),
              np.empty((5, 0), dtype.numpy))
    scalar = random_array(rng, dtype, ())
    same_bits(contiguize(executor, scalar), scalar)
    one = random_array(rng, dtype, (4, 4))[2:3, ::-1][:, 1:2]
    same_bits(contiguize(executor, one), np.ascontiguousarray(one))


def test_dense_input_uses_a_device_copy_and_offset_views_still_work(executor):
    a = random_array(np.random.default_rng(1), DType.U8, (1001,))
    same_bits(contiguize(executor, a), a)
    same_bits(contiguize(executor, a[3:]), a[3:].copy())


def test_collapse_and_widen():
    layout = collapse(Layout((2, 1, 3, 4), (12, 99, 4, 1), 5))
    assert layout == Layout((24,), (1,), 5)
    assert collapse(Layout((4, 3), (1, 4), 0)) == Layout((4, 3), (1, 4), 0)
    wide, word = widen(Layout((3, 8), (-16, 1), 32), 2)
    assert (wide, word) == (Layout((3, 1), (-2, 1), 4), 16)
    assert widen(Layout((3, 5), (8, 1), 0), 4) == (Layout((3, 5), (8, 1), 0), 4)
    assert widen(Layout((3, 4), (6, 1), 0), 4) == (Layout((3, 2), (3, 1), 0), 8)


def test_view_outside_the_span_is_refused(executor):
    a = np.arange(10, dtype=np.float32)
    dt = DType.F32
    step = Step(binding(OpKind.Contiguize, dt, dt), (0,), (("shape", (4,)), ("strides", (3,)), ("offset", 1)),
                (4,), dt)
    program = Program((dt,), (Layout.of(a),), (step,), (1,))
    with pytest.raises(ValueError, match=r"reaches elements 1\.\.10, outside the \d+-element source"):
        executor.run(program, [a])
