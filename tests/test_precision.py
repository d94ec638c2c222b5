"""The normwise per-row check of transforms (`worst_row_mismatch`): each row against its own scale,
the worst offending row and its worst element reported, NaN and zero rows handled."""

from __future__ import annotations

import numpy as np
import pytest

from lazyfuel.contracts.model import Precision
from lazyfuel.precision import worst_row_mismatch

SINGLE = Precision(True, 0, 1e-5, 0.0, True)


def _rows() -> np.ndarray:
    """Three rows along axis 1 with scales 1, 1e6 and 1e-3."""
    rng = np.random.default_rng(0)
    return (rng.standard_normal((3, 8)) * np.array([[1.0], [1e6], [1e-3]])).astype(np.float32)


def test_rows_within_their_own_scale_pass() -> None:
    want = _rows()
    got = want * np.float32(1 + 1e-6)
    assert worst_row_mismatch(got, want, 1, SINGLE) is None


def test_a_quiet_row_is_held_to_its_own_scale_not_the_loud_one() -> None:
    want = _rows()
    got = want.copy()
    got[2, 5] += np.float32(1e-6)  # 1e-6 is tiny beside row 1, but 1e-3 of row 2's scale
    m = worst_row_mismatch(got, want, 1, SINGLE)
    assert m is not None and m.index == (2, 5)
    assert m.why.startswith("row (2, :) along axis 1: max|got - expected| = 1e-06 is ")
    assert "beyond max_relative 1e-05 (normwise per row)" in m.why


def test_the_worst_row_and_its_worst_element_are_reported_along_axis_0() -> None:
    want = _rows().T.copy()  # rows along axis 0 now
    got = want.copy()
    got[1, 0] *= np.float32(1.001)
    got[3, 2] *= np.float32(1.1)
    got[4, 2] *= np.float32(1.01)
    m = worst_row_mismatch(got, want, 0, SINGLE)
    assert m.index == (3, 2) and m.why.startswith("row (:, 2) along axis 0")


def test_nan_fails_and_an_all_zero_row_needs_exact_zeros() -> None:
    want = np.zeros((2, 4), np.complex64)
    want[0] = 1 + 1j
    got = want.copy()
    got[0, 3] = np.nan
    assert worst_row_mismatch(got, want, 1, SINGLE).index == (0, 3)
    got = want.copy()
    got[1, 1] = 1e-30
    m = worst_row_mismatch(got, want, 1, SINGLE)
    assert m.index == (1, 1) and "is inf x max|expected| (0)" in m.why
    assert worst_row_mismatch(got, want, 1, Precision(True, 0, 1e-5, 1e-20, True)) is None


def test_a_shape_or_dtype_change_is_an_error() -> None:
    want = _rows()
    with pytest.raises(ValueError, match=r"result is float64 \(3, 8\), expected float32 \(3, 8\)"):
        worst_row_mismatch(want.astype(np.float64), want, 1, SINGLE)
