"""`lazyfuel.completion`: the marker a finished zarr array carries (what was written), the
marker of one being written, and `check_complete` refusing an array lazyfuel did not finish with
an error that names it and says what to do. Real zarr arrays in memory."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

from lazyfuel.completion import (
    ATTRIBUTE,
    INCOMPLETE,
    IncompleteStoreError,
    check_complete,
    complete_marker,
    marker,
)


def array(**attrs) -> zarr.Array:
    z = zarr.create_array(store={}, shape=(4,), dtype="f4", chunks=(2,))
    z.attrs.update(attrs)
    return z


def test_a_finished_arrays_marker_records_what_was_written():
    assert complete_marker((6, 4), np.dtype(">f4"), (3, 4), [np.uint32(7), 2**32 - 1]) == {
        "complete": True, "shape": [6, 4], "dtype": ">f4", "chunks": [3, 4], "chunk_count": 2,
        "crc32c": [7, 4294967295]}
    m = complete_marker((2,), np.float64, (2,), [1])
    assert type(m["crc32c"][0]) is int and m["dtype"] == "<f8"


def test_the_marker_is_read_back_from_the_attribute_or_none():
    assert marker(array()) is None
    assert marker(array(lazyfuel="not a dict")) is None
    assert marker(array(**{ATTRIBUTE: INCOMPLETE})) == {"complete": False}


def test_an_unfinished_array_is_refused_naming_where_it_is():
    with pytest.raises(IncompleteStoreError, match=r"^the zarr array at /data/out.zarr is incomplete: "
                       r"lazyfuel began writing it and the run did not finish \(attribute "
                       r"lazyfuel.complete is false"):
        check_complete(array(**{ATTRIBUTE: INCOMPLETE}), "/data/out.zarr")
    with pytest.raises(ValueError, match="incomplete"):  # a ValueError to callers that catch those
        check_complete(array(lazyfuel={"complete": "yes"}), "s")


def test_a_finished_array_gives_its_marker_and_a_foreign_one_none():
    done = complete_marker((4,), np.float32, (2,), [1, 2])
    assert check_complete(array(lazyfuel=done), "s") == done
    assert check_complete(array(), "s") is None
    assert check_complete(array(other={"complete": False}), "s") is None
