"""Fresh random data for the judge and the audit (`ops.data`): the special bit patterns of each float
format, arrays of every kind that carry them, and fill values already of the data's dtype."""

from __future__ import annotations

import numpy as np
import pytest

from lazyfuel.dtypes import DType
from lazyfuel.ops.data import fill_value, random_array, special_bits


def test_the_special_bits_of_float32_are_nans_zeros_subnormals_infinities_and_maxima() -> None:
    got = special_bits(8, 23, np.random.default_rng(1))
    values = np.array(got, np.uint32).view(np.float32)
    assert np.isnan(values[:3]).all() and np.signbit(values[1]) and not np.signbit(values[0])
    assert (got[2] >> 22) & 1 == 0  # signalling: the quiet bit clear
    assert got[3] == 0x8000_0000  # -0.0
    assert values[4] == np.finfo(np.float32).smallest_subnormal == -values[5]
    assert got[6] == 0x007F_FFFF  # the largest subnormal
    assert list(values[7:9]) == [np.inf, -np.inf]
    assert list(values[9:]) == [np.finfo(np.float32).max, -np.finfo(np.float32).max]


@pytest.mark.parametrize("dtype", list(DType), ids=str)
def test_random_arrays_have_the_shape_and_dtype_asked(dtype) -> None:
    a = random_array(np.random.default_rng(2), dtype, (7, 3))
    assert a.shape == (7, 3) and a.dtype == dtype.numpy
    if dtype is DType.BOOL:
        assert set(a.reshape(-1).tolist()) <= {False, True}


def test_float_arrays_carry_specials_and_the_same_seed_the_same_bits() -> None:
    a = random_array(np.random.default_rng(5), DType.F32, (1000,))
    assert np.isnan(a).any() and np.isinf(a).any()
    assert random_array(np.random.default_rng(5), DType.F32, (1000,)).tobytes() == a.tobytes()
    plain = random_array(np.random.default_rng(5), DType.F32, (1000,), specials=False)
    assert np.isfinite(plain).all()
    assert random_array(np.random.default_rng(5), DType.F64, (1,)).size == 1


def test_a_fill_value_is_one_of_the_datas_own_elements() -> None:
    data = random_array(np.random.default_rng(6), DType.F16, (4, 5))
    value = fill_value(data, np.random.default_rng(6))
    assert value.dtype == np.float16 and value.tobytes() in {x.tobytes() for x in data.reshape(-1)}
    empty = fill_value(np.zeros((0, 3), np.int8), np.random.default_rng(6))
    assert empty == 0 and empty.dtype == np.int8
