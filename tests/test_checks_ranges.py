"""Checking indices block by block without narrowing them (`integer_indices`, `index_ranges`):
the ranges each block records, and errors worded and placed exactly as `as_indices` words them."""

from __future__ import annotations

import numpy as np
import pytest

from lazyfuel import checks
from lazyfuel.checks import as_indices, index_ranges, integer_indices

INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def rows(n: int, size: int) -> list[tuple[slice, ...]]:
    """Regions of `size` rows covering an axis of `n`."""
    return [(slice(lo, min(lo + size, n)),) for lo in range(0, n, size)]


def expected(a: np.ndarray, regions) -> tuple:
    whole = a.reshape(a.shape or (1,))
    return tuple((int(whole[r].min()), int(whole[r].max())) if whole[r].size else None for r in regions)


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_ranges_are_each_regions_min_and_max_for_every_integer_dtype(dtype):
    a = np.random.default_rng(0).integers(0, 100, (40, 3)).astype(dtype)
    regions = [(slice(lo, lo + 10), slice(None)) for lo in range(0, 40, 10)]
    got = index_ranges(integer_indices(a, 100), 100, regions)
    assert got == expected(a, regions)
    assert all(isinstance(v, int) for r in got for v in r)


def test_ranges_of_slabs_and_threads_match_one_reduction(monkeypatch):
    # many slabs per region (a small SLAB) and several threads (above PARALLEL_INDICES)
    monkeypatch.setattr(checks, "SLAB", 1000)
    monkeypatch.setattr(checks, "PARALLEL_INDICES", 1 << 12)
    a = np.random.default_rng(1).integers(0, 1 << 20, 1 << 15)
    regions = [*rows(a.size, 5000), (slice(7, 7),)]
    assert index_ranges(a, 1 << 20, regions) == (*expected(a, regions[:-1]), None)


def test_ranges_of_non_contiguous_indices():
    base = np.random.default_rng(2).integers(0, 50, (30, 20))
    for a in (base.T, base[::-2, 1::3], base[:, 5]):
        regions = rows(a.shape[0], 4) if a.ndim == 1 else [(slice(lo, lo + 4), slice(None))
                                                           for lo in range(0, a.shape[0], 4)]
        assert index_ranges(a, 50, regions) == expected(a, regions)


def test_zero_d_and_empty_indices():
    assert index_ranges(integer_indices(np.int64(3), 5), 5, [(slice(0, 1),)]) == ((3, 3),)
    assert index_ranges(integer_indices([], 5), 5, [(slice(0, 0),)]) == (None,)
    with pytest.raises(IndexError, match=r"index 7 \(the 0-d index\) is out of range"):
        index_ranges(integer_indices(np.int64(7), 5), 5, [(slice(0, 1),)])


def test_integer_indices_keeps_dtype_and_memory_and_refuses_floats():
    a = np.arange(6, dtype=np.int16)[::2]
    assert integer_indices(a, 10) is a
    assert integer_indices([], 3).dtype == np.uint32
    assert integer_indices([2**32 - 1, 0], 2**40).dtype.kind in "iu"
    with pytest.raises(IndexError, match=r"index 18446744073709551615 at position 0 is out of range; "
                                         r"expected 0 <= index < 1099511627776"):
        integer_indices([2**64 - 1, 0], 2**40)  # Python ints beyond int64: checked one by one here
    with pytest.raises(TypeError, match=r"index values must be integers \(got dtype float64\)"):
        integer_indices(np.array([1.0]), 3)


def message(call) -> str:
    with pytest.raises(IndexError) as err:
        call()
    return str(err.value)


@pytest.mark.parametrize("bad, dtype", [(-1, np.int64), (-128, np.int8), (9, np.uint64), (2**40, np.int64)])
def test_a_bad_value_in_a_later_slab_and_block_raises_as_as_indices(monkeypatch, bad, dtype):
    monkeypatch.setattr(checks, "SLAB", 64)
    monkeypatch.setattr(checks, "PARALLEL_INDICES", 1 << 10)
    a = np.random.default_rng(3).integers(0, 9, (60, 40)).astype(dtype)
    a[47, 13] = bad  # block 2 of 3, several slabs in
    a[52, 0] = bad   # later in row-major order: not the one named
    regions = [(slice(lo, lo + 20), slice(None)) for lo in range(0, 60, 20)]
    got = message(lambda: index_ranges(a, 9, regions))
    assert got == message(lambda: as_indices(a, 9))
    assert "at position (47, 13)" in got


def test_the_first_bad_value_is_named_even_when_a_later_block_is_scanned_first(monkeypatch):
    monkeypatch.setattr(checks, "PARALLEL_INDICES", 1)
    a = np.zeros(1000, np.int32)
    a[900], a[100] = -5, 77
    regions = [(slice(500, 1000),), (slice(0, 500),)]
    with pytest.raises(IndexError, match=r"^index 77 at position 100 is out of range; "
                                         r"expected 0 <= index < 10$"):
        index_ranges(a, 10, regions)
