"""Gather's spec (`ops.gather`): the numpy reference bit-exact against take_along_axis on fresh random
data, errors by type and text, the step's params and how its output halves."""

from __future__ import annotations

import numpy as np
import pytest

from lazyfuel.dtypes import DType
from lazyfuel.ops.data import random_array
from lazyfuel.ops.gather import GatherParams, cut, gather, plan


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather_is_take_along_axis_bit_for_bit(dim) -> None:
    rng = np.random.default_rng(11)
    x = random_array(rng, DType.F32, (6, 7))  # NaN payloads and -0.0 among them
    idx_shape = (9, 7) if dim == 0 else (6, 4)
    idx = rng.integers(0, x.shape[dim], idx_shape).astype(np.int16)
    got = gather(x.T.T[:, :], dim, idx)
    want = np.take_along_axis(x, idx.astype(np.intp), axis=dim)
    assert got.dtype == x.dtype and got.flags.c_contiguous and got.tobytes() == want.tobytes()


def test_gather_refuses_bad_indices_and_shapes_by_name() -> None:
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    with pytest.raises(IndexError, match=r"index 3 at position \(1, 0\) is out of range; "
                                         r"expected 0 <= index < 3"):
        gather(x, 1, [[0], [3]])
    with pytest.raises(ValueError, match=r"gather index has shape \(3, 5\), expected \(2, any\) for source "
                                         r"shape \(2, 3\) and dim 1: axis 0 has 3 elements, the source 2"):
        gather(x, 1, np.zeros((3, 5), int))
    with pytest.raises(TypeError, match="must be integers"):
        gather(x, 0, [[0.5, 0, 0]])


def test_the_params_and_the_halving_rule() -> None:
    params, out = plan([(4, 5), (2, 5)], DType.F32, {"dim": 0})
    assert params == GatherParams((4, 5), (2, 5), 0) and out == (2, 5)
    assert cut({"dim": 0}, 0, [(4, 5), (2, 5)]) == [None, 0]  # along dim the source is needed whole
    assert cut({"dim": 0}, 1, [(4, 5), (2, 5)]) == [1, 1]
