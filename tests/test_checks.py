"""Shared user-input checks: accepted forms, results, and the wording of every error."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from lazyfuel.checks import (
    as_indices,
    check_mask,
)

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
