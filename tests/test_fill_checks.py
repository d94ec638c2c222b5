"""Fill values as the bytes of the data's dtype (`fill_checks.fill_bytes`): accepted forms cast exactly, and
the wording of every refusal."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lazyfuel.checks import (
    fill_bytes,
)
from lazyfuel.dtypes import DType


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


def test_fill_bytes_result_width_matches_dtype():
    for dtype in DType:
        assert len(fill_bytes(1, dtype)) == dtype.itemsize
        assert math.isclose(abs(complex(np.frombuffer(fill_bytes(1, dtype), dtype.numpy)[0])), 1)
