"""Building index_select and gather (`graph.select_ops`): indices checked when the op is built (concrete)
or typed (lazy), errors naming the value and its position; the chunks of the results."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import lazyfuel as lf

from .small_array import x


def test_negative_index_raises_when_built_naming_value_and_position():
    with pytest.raises(IndexError, match=r"index -1 at position 1 is negative; expected 0 <= index < 5 "
                                         r"\(no wrap-around, as in PyTorch\)"):
        lf.index_select(x(), 0, [0, -1])


def test_index_too_large_raises_naming_value_and_position():
    with pytest.raises(IndexError, match=r"index 6 at position 2 is out of range; expected 0 <= index < 6"):
        lf.index_select(x(), -1, np.array([0, 1, 6], np.uint8))
    with pytest.raises(IndexError, match=r"index 5 at position \(1, 0\) is out of range"):
        lf.gather(x(), 0, np.array([[0] * 6, [5] + [0] * 5]))


@pytest.mark.parametrize("bad", [np.array([0.0, 1.0]), np.array([True, False])])
def test_float_and_bool_indices_are_refused(bad):
    with pytest.raises(TypeError, match=rf"index values must be integers \(got dtype {bad.dtype}\)"):
        lf.index_select(x(), 0, bad)
    with pytest.raises(TypeError, match="must be integers"):
        lf.index_select(x(), 0, da.from_array(bad))  # lazy: the dtype is known when built


def test_two_d_indices_for_index_select_are_a_value_error():
    with pytest.raises(ValueError, match=r"index_select takes 1-d indices, got shape \(2, 1\)"):
        lf.index_select(x(), 0, [[0], [1]])


def test_gather_index_shape_must_fit():
    with pytest.raises(ValueError, match=r"gather index has shape \(2, 5\), expected \(any, 6\)"):
        lf.gather(x(), 0, np.zeros((2, 5), int))
    with pytest.raises(ValueError, match="gather index has 1 dims but the source has 2"):
        lf.gather(x(), 1, da.zeros(3, dtype=int))


def test_zero_d_index_select_takes_exactly_one_index():
    with pytest.raises(ValueError, match="index_select on a 0-d array takes exactly one index, got 2"):
        lf.index_select(np.float32(1), 0, [0, 0])
    with pytest.raises(IndexError, match="index 1 at position 0 is out of range; expected 0 <= index < 1"):
        lf.index_select(np.float32(1), 0, [1])


def test_select_output_chunks():
    y = x()
    assert lf.index_select(y, 1, np.arange(9) % 6).chunks == ((2, 2, 1), (4, 4, 1))
    lazy = da.from_array(np.arange(9) % 6, chunks=5)
    assert lf.index_select(y, 1, lazy).chunks == ((2, 2, 1), (5, 4))
    assert lf.gather(y, 0, np.zeros((7, 6), int)).chunks == ((2, 2, 2, 1), (4, 2))
    assert lf.gather(y, 0, da.zeros((7, 6), dtype=int, chunks=3)).chunks == ((3, 3, 1), (4, 2))
