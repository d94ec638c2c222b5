"""`lazyfuel.integrity`: chunk checksums of values, the marker checked against the metadata, and
`VerifiedChunks` reading any basic index of a zarr array bitwise as numpy does while checking
every chunk it touches (a missing or swapped chunk is a DamagedStoreError naming it). Real zarr
arrays in memory, fresh random data."""

from __future__ import annotations

import asyncio

import google_crc32c
import numpy as np
import pytest
import zarr

from lazyfuel.completion import complete_marker
from lazyfuel.integrity import (
    DamagedStoreError,
    VerifiedChunks,
    _bounding_box,
    check_metadata,
    chunk_grid,
    values_crc,
)

RNG = np.random.default_rng()


def written(a: np.ndarray, chunks: tuple[int, ...]) -> tuple[zarr.Array, list[int]]:
    """`a` stored in a zarr array of `chunks`, and the crc32c of each chunk's values (grid order)."""
    z = zarr.create_array(store={}, shape=a.shape, dtype=a.dtype, chunks=chunks)
    z[...] = a
    reader = VerifiedChunks(z, [0] * int(np.prod(chunk_grid(a.shape, chunks))), "mem")
    crcs = [values_crc(a[reader.region(w)]) for w in np.ndindex(*reader.grid)]
    return z, crcs


def test_the_crc_is_of_the_values_whatever_their_layout():
    a = RNG.standard_normal((5, 7)).astype(np.float32)
    want = google_crc32c.value(a.tobytes())
    assert values_crc(a) == want == values_crc(np.asfortranarray(a)) == values_crc(a.T.copy().T)
    assert values_crc(a[::-1]) != want


def test_the_grid_counts_partial_chunks():
    assert chunk_grid((10, 4), (3, 4)) == (4, 1)
    assert chunk_grid((0, 5), (2, 2)) == (0, 3)
    assert chunk_grid((), ()) == ()


def test_metadata_matching_the_marker_gives_the_checksums():
    a = RNG.integers(0, 100, (6, 5)).astype(np.int32)
    z, crcs = written(a, (4, 2))
    assert check_metadata(z, complete_marker(a.shape, a.dtype, (4, 2), crcs), "mem") == crcs


@pytest.mark.parametrize(("change", "message"), [
    ({"shape": [6, 4]}, r"has metadata shape \(6, 5\) but lazyfuel wrote \(6, 4\)"),
    ({"dtype": "<i8"}, r"has metadata dtype <i4 but lazyfuel wrote <i8"),
    ({"chunks": [2, 2]}, r"has metadata chunks \(4, 2\) but lazyfuel wrote \(2, 2\)"),
    ({"chunk_count": 5}, r"has 6 chunks in its grid but its marker records 5 chunk\(s\) and 6 checksum"),
    ({"crc32c": [1, 2]}, r"has 6 chunks in its grid but its marker records 6 chunk\(s\) and 2 checksum"),
    ({"crc32c": None}, r"has a damaged lazyfuel marker \(TypeError"),
])
def test_metadata_that_disagrees_with_the_marker_is_refused(change, message):
    a = RNG.integers(0, 100, (6, 5)).astype(np.int32)
    z, crcs = written(a, (4, 2))
    marker = {**complete_marker(a.shape, a.dtype, (4, 2), crcs), **change}
    with pytest.raises(DamagedStoreError, match=rf"^the zarr array at mem {message}"):
        check_metadata(z, marker, "mem")


def test_a_marker_missing_a_key_is_damaged():
    z, crcs = written(np.zeros(4, np.float32), (2,))
    marker = complete_marker((4,), np.float32, (2,), crcs)
    del marker["chunk_count"]
    with pytest.raises(DamagedStoreError, match=r"damaged lazyfuel marker \(KeyError\('chunk_count'\)"):
        check_metadata(z, marker, "mem")


KEYS = [(...,), (slice(None),), (slice(2, 9), slice(None, None, -1)), (slice(8, 1, -3), 2), (-1, ...),
        (3, slice(4, 4)), (slice(None, None, 2), -5), (np.int64(6), slice(1, None, 2)), (slice(20, 30),)]


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_a_verified_read_gives_numpys_bits_for_any_basic_index(key):
    a = RNG.standard_normal((10, 7)).astype(np.float64)
    z, crcs = written(a, (3, 4))
    got = VerifiedChunks(z, crcs, "mem")[key]
    want = a[key]
    assert got.shape == want.shape and got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_the_bounding_box_is_unit_step_and_the_index_within_it_relative():
    assert _bounding_box((slice(8, 1, -3),), (10,)) == ((slice(2, 9),), (slice(6, None, -3),))
    assert _bounding_box((-1, ...), (4, 5)) == ((slice(3, 4), slice(0, 5)), (0, slice(0, 5, 1)))
    with pytest.raises(IndexError, match=r"^index 4 is out of bounds for an axis of size 4$"):
        _bounding_box((4,), (4,))
    with pytest.raises(TypeError, match=r"takes basic indices \(ints, slices, \.\.\.\), got list"):
        _bounding_box(([0, 1],), (4,))
    with pytest.raises(TypeError, match="got bool"):
        _bounding_box((True,), (4,))


def test_a_chunk_swapped_with_another_is_named_with_both_checksums():
    a = RNG.standard_normal((6, 4)).astype(np.float32)
    z, crcs = written(a, (2, 4))
    z[0:2] = a[2:4]
    reader = VerifiedChunks(z, crcs, "mem://x")
    assert reader[2:6].tobytes() == a[2:6].tobytes()  # chunks the read does not touch are not checked
    found = values_crc(a[2:4])
    with pytest.raises(DamagedStoreError, match=rf"^chunk \(0, 0\) \(key 'c/0/0'\) of the zarr array at "
                       rf"mem://x does not hold what lazyfuel wrote there "
                       rf"\(crc32c of its values {found:08x}, "
                       rf"written {crcs[0]:08x}\)"):
        reader[1]


def test_a_missing_chunk_is_refused_rather_than_read_as_fill_values():
    a = RNG.standard_normal((4, 4)).astype(np.float32)
    z, crcs = written(a, (2, 2))
    asyncio.run(z.store.delete("c/1/0"))
    with pytest.raises(DamagedStoreError, match=r"^chunk \(1, 0\) \(key 'c/1/0'\) of the zarr array at mem "
                       r"is missing: lazyfuel wrote every chunk"):
        VerifiedChunks(z, crcs, "mem")[3, 0]
