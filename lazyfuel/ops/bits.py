"""Moving bits, not values: the raw-word views every data-mover reference and CPU kernel uses.

An array is moved through an unsigned-integer (or 16-byte void) view of the same width, so the
result is bit-identical to the input elements: NaN payloads, signalling NaNs, -0.0 and subnormals
included.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lazyfuel.dtypes import DType

BITS = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32),
        8: np.dtype(np.uint64), 16: np.dtype("V16")}


def bits(a: np.ndarray) -> np.ndarray:
    """`a` viewed as same-width raw words (any layout): moving these moves bits, not values."""
    return a.view(BITS[a.dtype.itemsize])


def checked_array(x: Any) -> np.ndarray:
    """`x` as a numpy array of a lazyfuel dtype; TypeError naming the accepted dtypes otherwise."""
    a = np.asarray(x)
    DType.from_numpy(a.dtype)
    return a


def fresh(words: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A newly computed raw-word array as a C-contiguous array of `dtype` (copies only if needed)."""
    return np.asarray(words, order="C").view(dtype)


def fill_word(raw: bytes, dtype: np.dtype) -> np.ndarray:
    """The fill value's bytes as a 0-d raw word of `dtype`'s width; ValueError if the width differs."""
    if len(raw) != dtype.itemsize:
        raise ValueError(f"fill_bytes has {len(raw)} bytes, expected {dtype.itemsize} for {dtype}")
    return np.frombuffer(raw, dtype=BITS[dtype.itemsize]).reshape(())
