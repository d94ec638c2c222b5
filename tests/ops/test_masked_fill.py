"""masked_fill's spec (`ops.masked_fill`): the numpy reference bit-exact against np.where on fresh
random data (the fill's exact bits kept), the mask broadcasting up, errors by type and text, the
step's params."""

from __future__ import annotations

import numpy as np
import pytest

from lazyfuel.dtypes import DType
from lazyfuel.ops.data import fill_value, random_array
from lazyfuel.ops.masked_fill import MaskedFillParams, masked_fill, plan


@pytest.mark.parametrize("dtype", [DType.F16, DType.F32, DType.F64, DType.I8, DType.U64, DType.C64])
def test_masked_fill_is_np_where_bit_for_bit(dtype) -> None:
    rng = np.random.default_rng(12)
    x = random_array(rng, dtype, (5, 8))[:, ::2]  # a strided view
    mask = rng.random((5, 4)) < 0.5
    value = fill_value(x, rng)
    got = masked_fill(x, mask, value)
    want = np.where(mask, _raw(np.asarray(value)), _raw(x))  # raw words: NaN payloads kept
    assert got.dtype == x.dtype and got.flags.c_contiguous and got.tobytes() == want.tobytes()


def test_a_larger_mask_broadcasts_the_data_up() -> None:
    got = masked_fill(np.arange(3, dtype=np.int32), np.array([[True], [False]]), -1)
    assert got.tolist() == [[-1, -1, -1], [0, 1, 2]]


def test_bad_masks_and_values_are_refused_by_name() -> None:
    x = np.zeros(3, np.uint8)
    with pytest.raises(TypeError, match=r"mask must be bool \(got uint8\)"):
        masked_fill(x, np.ones(3, np.uint8), 1)
    with pytest.raises(ValueError, match="out of range for U8"):
        masked_fill(x, np.ones(3, bool), 300)
    with pytest.raises(ValueError, match="do not broadcast together"):
        masked_fill(x, np.ones(4, bool), 1)


def test_the_params_carry_the_fill_values_bytes() -> None:
    params, out = plan([(4, 5), (4, 5)], DType.F32, {"value": -0.0})
    assert params == MaskedFillParams(np.float32(-0.0).tobytes()) and out == (4, 5)


def _raw(a: np.ndarray) -> np.ndarray:
    """`a`'s elements as raw words of its width."""
    return np.ascontiguousarray(a).view(f"V{a.itemsize}")
