"""Shared fixtures of the graph tests: the backend to run on, and bit-exact comparison."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def bits_equal():
    """`bits_equal(got, want)`: assert the same shape, dtype and bytes."""
    return assert_bits_equal


def assert_bits_equal(got: np.ndarray, want: np.ndarray) -> None:
    """Same shape, same dtype, same bytes (NaN payloads and -0.0 included)."""
    want = np.asarray(want)
    assert isinstance(got, np.ndarray), type(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    g = np.ascontiguousarray(got).reshape(-1).view(np.uint8)
    w = np.ascontiguousarray(want).reshape(-1).view(np.uint8)
    assert np.array_equal(g, w)
