"""Mask and gather shapes (`shape_checks`): broadcasts accepted as numpy's, extents, ranks and dims refused
naming what differs."""

from __future__ import annotations

import pytest

from lazyfuel.checks import (
    broadcast_mask_shape,
    check_gather_shapes,
)


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
