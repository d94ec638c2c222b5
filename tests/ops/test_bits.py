"""Raw-word views (`ops.bits`): moving the words moves the bits, NaN payloads and -0.0 included; a fill
word of the wrong width and a dtype lazyfuel cannot hold are refused by name."""

from __future__ import annotations

import numpy as np
import pytest

from lazyfuel.ops.bits import bits, checked_array, fill_word, fresh


@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32, np.float64, np.complex128])
def test_taking_raw_words_keeps_every_bit(dtype) -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, 8 * 5 * np.dtype(dtype).itemsize, dtype=np.uint8).view(dtype).reshape(8, 5)
    words = bits(a[::-2].T)  # any layout
    assert words.dtype.itemsize == a.dtype.itemsize and words.dtype.kind in "uV"
    taken = fresh(words[:, [2, 0, 3]], a.dtype)
    assert taken.flags.c_contiguous and taken.dtype == a.dtype
    assert taken.tobytes() == np.ascontiguousarray(a[::-2].T[:, [2, 0, 3]]).tobytes()


def test_fill_word_is_the_raw_bytes_of_the_dtypes_width() -> None:
    raw = np.float32(-0.0).tobytes()
    word = fill_word(raw, np.dtype(np.float32))
    assert word.shape == () and word.dtype == np.uint32 and word.tobytes() == raw
    with pytest.raises(ValueError, match=r"fill_bytes has 4 bytes, expected 8 for float64"):
        fill_word(raw, np.dtype(np.float64))


def test_checked_array_takes_lazyfuel_dtypes_and_refuses_others() -> None:
    a = np.arange(3, dtype=np.int16)
    assert checked_array(a) is a
    assert checked_array([1.5, 2.0]).dtype == np.float64
    with pytest.raises(TypeError, match=r"unsupported numpy dtype timedelta64\[s\]"):
        checked_array(np.zeros(2, "m8[s]"))
