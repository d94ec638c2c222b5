"""Building masked_fill (`graph.fill_ops`): the mask's dtype and broadcast checked at the call, a larger
mask stretching the data lazily, the fill value held to the data's dtype."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import lazyfuel as lf

from .small_array import x


def test_uint8_mask_is_refused_not_reinterpreted():
    msg = r"mask must be bool \(got uint8\); a uint8 mask is not reinterpreted: pass mask.astype\(bool\)"
    with pytest.raises(TypeError, match=msg):
        lf.masked_fill(x(), np.ones(6, np.uint8), 0)
    with pytest.raises(TypeError, match=msg):
        lf.masked_fill(x(), da.ones(6, dtype=np.uint8, chunks=3), 0)


def test_mask_must_broadcast_with_the_data():
    msg = (r"mask of shape \(5,\) and data of shape \(5, 6\) do not broadcast together: dim -1 has 5 "
           r"elements in the mask and 6 in the data \(expected equal extents, or 1 in either\)")
    with pytest.raises(ValueError, match=msg):
        lf.masked_fill(x(), np.ones(5, bool), 0)
    with pytest.raises(ValueError, match=r"mask of shape \(3, 4, 6\) and data of shape \(5, 6\) do not "
                                         r"broadcast together: dim -2 has 4 elements in the mask and 5"):
        lf.masked_fill(x(), da.ones((3, 4, 6), dtype=bool), 0)  # lazy: checked at the call all the same


def test_a_larger_mask_stretches_the_data_up_lazily():
    """Issue 15: mask (2, 1) over data (25,) gives (2, 25), as np.where and torch do; nothing runs."""
    y = lf.masked_fill(np.arange(25.0), np.array([[True], [False]]), -1)
    assert (y.shape, y.chunks) == ((2, 25), ((2,), (25,)))
    lazy = da.from_array(np.ones((6, 1, 6), bool), chunks=(2, 1, 3))
    y = lf.masked_fill(x(), lazy, 0)  # data (5, 6) in (2, 2, 1) x (4, 2) chunks
    assert y.shape == (6, 5, 6)
    assert y.chunks == ((2, 2, 2), (2, 2, 1), (4, 2))  # new dim: the mask's chunks; the rest: the data's


def test_fill_value_must_fit_the_dtype():
    with pytest.raises(ValueError, match="out of range for U8"):
        lf.masked_fill(np.zeros(3, np.uint8), np.ones(3, bool), 300)
    with pytest.raises(TypeError, match="fill value must be"):
        lf.masked_fill(x(), np.ones(6, bool), "zero")


def test_a_fraction_into_integers_is_refused_as_300_into_uint8_is():
    """Issue 15: masked_fill(int32 array, 1.5) filled 1 silently; the one rule refuses it."""
    with pytest.raises(ValueError, match=r"fill value 1.5 is not a whole number, so I32 cannot hold it"):
        lf.masked_fill(np.zeros(3, np.int32), np.ones(3, bool), 1.5)
    with pytest.raises(ValueError, match=r"fill value 2 is not a truth value, so BOOL cannot hold it"):
        lf.masked_fill(np.zeros(3, bool), np.ones(3, bool), 2)
    assert lf.masked_fill(np.zeros(3, np.int32), np.ones(3, bool), 2.0).compute().tolist() == [2, 2, 2]
