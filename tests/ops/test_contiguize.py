"""Contiguize's spec (`ops.contiguize`): a fresh row-major copy of any view, bit for bit on fresh random
data, and its params as a view's layout in its memory span."""

from __future__ import annotations

import numpy as np
import pytest

from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.ops.contiguize import ContiguizeParams, contiguize
from lazyfuel.ops.data import random_array


@pytest.mark.parametrize("dtype", [DType.BF16, DType.F32, DType.F64, DType.C128, DType.BOOL])
def test_any_view_comes_out_a_fresh_row_major_copy_bit_for_bit(dtype) -> None:
    a = random_array(np.random.default_rng(8), dtype, (6, 5, 4))
    for view in (a.transpose(2, 0, 1), a[::-2, 1:, ::-1], np.broadcast_to(a[:1], (3, 5, 4)), a):
        got = contiguize(view)
        assert got.flags.c_contiguous and got.dtype == a.dtype and not np.shares_memory(got, a)
        assert got.tobytes() == np.ascontiguousarray(view).tobytes()


def test_the_params_are_the_views_layout() -> None:
    view = Layout((3, 4), (1, 3), 2)
    assert ContiguizeParams.of_layout(view) == ContiguizeParams((3, 4), (1, 3), 2)
    with pytest.raises(TypeError, match=r"unsupported numpy dtype"):
        contiguize(np.zeros(2, "M8[s]"))
