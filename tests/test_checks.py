"""Shared user-input checks: accepted forms, results, and the wording of every error."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from lazyfuel.checks import (
    as_indices,
    broadcast_mask_shape,
    check_gather_shapes,
    check_mask,
    fill_bytes,
)
from lazyfuel.dtypes import DType

INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


# --- as_indices -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_as_indices_accepts_every_integer_dtype(dtype):
    out = as_indices(np.array([[2, 0], [1, 1]], dtype), 3)
    assert out.dtype == np.uint32 and out.flags.c_contiguous
    np.testing.assert_array_equal(out, [[2, 0], [1, 1]])


def test_as_indices_lists_scalars_and_views():
    np.testing.assert_array_equal(as_indices([2, 0], 3), [2, 0])
    assert as_indices(np.int64(2), 3).shape == ()
    strided = np.arange(10, dtype=np.int64)[::-3]
    out = as_indices(strided, 10)
    assert out.flags.c_contiguous
    np.testing.assert_array_equal(out, [9, 6, 3, 0])


def test_as_indices_empty_is_fine():
    assert as_indices([], 3).dtype == np.uint32
    assert as_indices(np.zeros((0, 2), np.int64), 0).shape == (0, 2)


def test_as_indices_negative_names_value_and_position():
    with pytest.raises(IndexError, match=r"index -1 at position 1 is negative; "
                                         r"expected 0 <= index < 3 \(no wrap-around, as in PyTorch\)"):
        as_indices([0, -1, 2], 3)


def test_as_indices_too_large_names_value_position_and_range():
    with pytest.raises(IndexError, match=r"^index 5 at position \(1, 0\) is out of range; "
                                         r"expected 0 <= index < 3$"):
        as_indices(np.array([[0, 1], [5, 0]], np.uint8), 3)


def test_as_indices_reports_first_bad_in_row_major_order():
    with pytest.raises(IndexError, match="index 7 at position 1 "):
        as_indices([0, 7, -1], 3)
    with pytest.raises(IndexError, match="index -2 at position 0 "):
        as_indices([-2, 7], 3)


def test_as_indices_names_what():
    with pytest.raises(IndexError, match=r"^gather index 4 at position 0 is out of range; "
                                         r"expected 0 <= gather index < 4$"):
        as_indices([4], 4, what="gather index")


def test_as_indices_empty_axis():
    with pytest.raises(IndexError, match="the axis has length 0, so no index is valid"):
        as_indices([0], 0)


def test_as_indices_beyond_32_bits():
    with pytest.raises(IndexError, match=r"index 4294967296 at position 1 does not fit in 32 bits; "
                                         r"U32 indices hold 0 <= index < 2\*\*32"):
        as_indices(np.array([0, 2**32], np.uint64), 2**40)
    assert as_indices([2**32 - 1], 2**40)[0] == 2**32 - 1


def test_as_indices_object_array_of_python_ints():
    np.testing.assert_array_equal(as_indices(np.array([2, 0], object), 3), [2, 0])


def test_as_indices_python_int_beyond_int64():
    with pytest.raises(IndexError, match=f"index {2**70} at position 0 is out of range"):
        as_indices([2**70], 3)


@pytest.mark.parametrize("bad", [[1.0], np.array([0.5], np.float32), [True, False], [1j],
                                 np.array([1.0], object), ["a"], np.array([], np.float64)])
def test_as_indices_non_integer_is_type_error(bad):
    with pytest.raises(TypeError, match=r"index values must be integers \(got dtype .*\); "
                                        r"pass an integer array"):
        as_indices(bad, 3)


@given(hnp.arrays(st.sampled_from(INT_DTYPES), hnp.array_shapes(min_dims=0, max_dims=3, min_side=0)),
       st.integers(0, 300))
def test_as_indices_agrees_with_a_plain_loop(a, axis_len):
    flat = [int(v) for v in a.ravel()]
    bad = next((i for i, v in enumerate(flat) if not 0 <= v < axis_len), None)
    if bad is None:
        out = as_indices(a, axis_len)
        assert out.dtype == np.uint32 and out.shape == a.shape
        assert [int(v) for v in out.ravel()] == flat
    else:
        with pytest.raises(IndexError, match=f"index {flat[bad]} "):
            as_indices(a, axis_len)


# --- check_mask -------------------------------------------------------------------------------


def test_check_mask_accepts_bool_without_copy():
    m = np.array([True, False])
    assert check_mask(m) is m
    assert check_mask([True]).dtype == np.bool_
    assert check_mask([]).dtype == np.bool_


def test_check_mask_refuses_uint8_with_the_fix():
    with pytest.raises(TypeError, match=r"^mask must be bool \(got uint8\).*pass mask\.astype\(bool\)$"):
        check_mask(np.array([0, 1], np.uint8))


@pytest.mark.parametrize("dtype", [np.int64, np.float32, np.int8])
def test_check_mask_refuses_other_dtypes(dtype):
    with pytest.raises(TypeError, match=rf"mask must be bool \(got {np.dtype(dtype)}\)"):
        check_mask(np.array([0, 1], dtype))


# --- fill_bytes -------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "dtype", "expected"), [
    (1.5, DType.F32, np.float32(1.5)),
    (2, DType.F64, np.float64(2.0)),
    (True, DType.BF16, ml_dtypes.bfloat16(1.0)),
    (2.0, DType.U8, np.uint8(2)),        # a whole float is held exactly
    (-3 + 0j, DType.I8, np.int8(-3)),
    (np.float32(-2), DType.I32, np.int32(-2)),
    (2**64 - 1, DType.U64, np.uint64(2**64 - 1)),
    (-(2**15), DType.I16, np.int16(-(2**15))),
    (65535.0, DType.U16, np.uint16(65535)),
    (255, DType.U8, np.uint8(255)),
    (2**32 - 1, DType.U32, np.uint32(2**32 - 1)),
    (-1, DType.I64, np.int64(-1)),
    (1, DType.BOOL, np.bool_(True)),
    (0.0, DType.BOOL, np.bool_(False)),
    (np.True_, DType.BOOL, np.bool_(True)),
    (1 + 0j, DType.F32, np.float32(1.0)),
    (1 + 2j, DType.C64, np.complex64(1 + 2j)),
    (3, DType.C128, np.complex128(3)),
    (np.float16(0.1), DType.F32, np.float32(np.float16(0.1))),
    (ml_dtypes.bfloat16(3), DType.F32, np.float32(3)),
    (np.array(7), DType.I32, np.int32(7)),
    (float("inf"), DType.F16, np.float16("inf")),
    (2**70, DType.F32, np.float32(2.0**70)),
    (-0.0, DType.F64, np.float64(-0.0)),
])
def test_fill_bytes_casts(value, dtype, expected):
    assert fill_bytes(value, dtype) == np.asarray(expected).tobytes()


def test_fill_bytes_keeps_exact_bits_of_same_dtype():
    payload = np.array([0x7FA00001], np.uint32).view(np.float32)[0]  # signalling NaN with payload
    assert fill_bytes(payload, DType.F32) == b"\x01\x00\xa0\x7f"
    assert fill_bytes(float("nan"), DType.F64) == np.float64("nan").tobytes()


def test_fill_bytes_accepts_dtype_names():
    assert fill_bytes(1, "U8") == b"\x01"


@pytest.mark.parametrize(("value", "dtype", "message"), [
    (256, DType.U8, r"fill value 256 is out of range for U8 \(expected 0 <= value <= 255\)"),
    (-1, DType.U32, r"fill value -1 is out of range for U32"),
    (-1, DType.U8, r"fill value -1 is out of range for U8"),
    (1.5, DType.I32, r"fill value 1.5 is not a whole number, so I32 cannot hold it exactly \(nothing is "
                     r"truncated\); expected a whole number -2147483648 <= value <= 2147483647"),
    (-0.5, DType.U8, r"fill value -0.5 is not a whole number"),
    (np.float16(2.5), DType.I16, r"is not a whole number, so I16"),
    (2**64, DType.U64, r"out of range for U64 \(expected 0 <= value <= 18446744073709551615\)"),
    (128, DType.I8, r"out of range for I8 \(expected -128 <= value <= 127\)"),
    (1e20, DType.U64, r"out of range for U64"),
    (5, DType.BOOL, r"fill value 5 is not a truth value, so BOOL cannot hold it exactly; expected "
                    r"True, False, 0 or 1"),
    (0.5, DType.BOOL, r"not a whole number, so BOOL cannot hold it exactly \(nothing is truncated\); "
                      r"expected True, False, 0 or 1, e.g. value != 0"),
    (1 + 2j, DType.F32, r"fill value \(1\+2j\) is complex but the data is F32, which holds real "
                        r"values only; pass a real value"),
    (1j, DType.I64, r"is complex but the data is I64"),
    (2**63, DType.I64, r"out of range for I64"),
    (float("nan"), DType.I32, r"cannot be converted to I32: integers have no NaN or infinity"),
    (float("-inf"), DType.U8, r"integers have no NaN or infinity"),
    (1e300, DType.F32, r"fill value 1e\+300 cannot be converted to F32 without overflow; expected a "
                       r"magnitude <= 3\.40282e\+38, or ±inf"),
    (70000, DType.F16, r"cannot be converted to F16 without overflow"),
    (10**400, DType.F64, r"cannot be converted to F64 without overflow"),
    (1e300 + 1j, DType.C64, r"cannot be converted to C64 without overflow"),
])
def test_fill_bytes_value_errors(value, dtype, message):
    with pytest.raises(ValueError, match=message):
        fill_bytes(value, dtype)


@pytest.mark.parametrize(("value", "message"), [
    ("1", r"fill value must be a bool, int, float or complex scalar \(Python or numpy\), got str '1'"),
    (None, r"got NoneType None"),
    (np.zeros(2), r"fill value must be a scalar, got an array of shape \(2,\)"),
])
def test_fill_bytes_type_errors(value, message):
    with pytest.raises(TypeError, match=message):
        fill_bytes(value, DType.F32)


@given(st.floats(allow_nan=False, allow_infinity=False, width=32))
def test_fill_bytes_float32_values_are_exact(x):
    assert fill_bytes(np.float32(x), DType.F32) == np.float32(x).tobytes()


@given(st.integers(-(2**40), 2**40), st.sampled_from([DType.U8, DType.U32, DType.I32, DType.I64]))
def test_fill_bytes_integers_in_range_exact_else_value_error(v, dtype):
    info = np.iinfo(dtype.numpy)
    if info.min <= v <= info.max:
        assert fill_bytes(v, dtype) == np.asarray(v, dtype.numpy).tobytes()
    else:
        with pytest.raises(ValueError, match="out of range"):
            fill_bytes(v, dtype)


# --- broadcast_mask_shape ---------------------------------------------------------------------


@pytest.mark.parametrize(("mask", "data"), [((2, 3), (2, 3)), ((3,), (2, 3)), ((1, 3), (2, 3)),
                                            ((), (2, 3)), ((2, 1), (4, 2, 5)), ((), ())])
def test_broadcast_mask_shape_ok(mask, data):
    assert broadcast_mask_shape(mask, data) == data


def test_broadcast_mask_shape_bad_dim():
    with pytest.raises(ValueError, match=r"mask of shape \(3, 1\) does not broadcast to data of shape "
                                         r"\(2, 4\): mask dim 0 has 3 elements, expected 1 or 2"):
        broadcast_mask_shape((3, 1), (2, 4))


def test_broadcast_mask_shape_mask_larger_than_data():
    with pytest.raises(ValueError, match=r"mask of shape \(2, 3\) does not broadcast to data of shape "
                                         r"\(3,\): the mask has 2 dims, the data 1"):
        broadcast_mask_shape((2, 3), (3,))


# --- check_gather_shapes ----------------------------------------------------------------------


def test_check_gather_shapes_ok_and_normalises_dim():
    assert check_gather_shapes((2, 3), (2, 5), 1) == 1
    assert check_gather_shapes((2, 3), (7, 3), -2) == 0
    assert check_gather_shapes((), (), 0) == 0
    assert check_gather_shapes((), (4,), -1) == 0


def test_check_gather_shapes_extent_mismatch():
    with pytest.raises(ValueError, match=r"gather index has shape \(3, 3\), expected \(2, any\) for "
                                         r"source shape \(2, 3\) and dim 1: axis 0 has 3 elements, "
                                         r"the source 2"):
        check_gather_shapes((2, 3), (3, 3), 1)


def test_check_gather_shapes_rank_mismatch():
    with pytest.raises(ValueError, match=r"gather index has 1 dims but the source has 2; expected an "
                                         r"index of rank 2 \(got shape \(2,\) for source shape \(2, 3\)\)"):
        check_gather_shapes((2, 3), (2,), 1)


def test_check_gather_shapes_dim_out_of_range():
    with pytest.raises(IndexError, match=r"dim 2 is out of range for an array of 2 dims"):
        check_gather_shapes((2, 3), (2, 3), 2)


def test_fill_bytes_result_width_matches_dtype():
    for dtype in DType:
        assert len(fill_bytes(1, dtype)) == dtype.itemsize
        assert math.isclose(abs(complex(np.frombuffer(fill_bytes(1, dtype), dtype.numpy)[0])), 1)
