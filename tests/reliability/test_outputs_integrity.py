"""Stores lazyfuel writes can be checked (issue 16, #10): a crc32c on every stored chunk, the crc32c of
every chunk's values in the completion marker, and `lf.from_zarr` refusing what does not match
with a `DamagedStoreError` naming the chunk: a missing chunk (never read as fill values), swapped
chunks, a truncated or corrupted one, metadata edited to disagree with the data. zarr v3 and v2.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import zarr

import lazyfuel as lf
from lazyfuel.integrity import DamagedStoreError, values_crc

RNG = np.random.default_rng(1610)
X = RNG.standard_normal((40, 6)).astype(np.float32)
X[16:24] = 0  # chunk 2 equals the fill value: zarr skips such chunks unless told otherwise


@pytest.fixture(params=[3, 2], ids=["v3", "v2"])
def store(request, tmp_path) -> Path:
    path = tmp_path / "x.zarr"
    lf.from_array(X, chunks=(8, 6)).to_zarr(path, zarr_format=request.param)
    return path


def chunk_file(store: Path, row_block: int) -> Path:
    z = zarr.open_array(str(store), mode="r")
    return store / z.metadata.encode_chunk_key((row_block, 0))


def metadata_file(store: Path) -> Path:
    return store / ("zarr.json" if (store / "zarr.json").exists() else ".zarray")


def read(store: Path) -> np.ndarray:
    return lf.from_zarr(store).compute(scheduler="sync")


def test_every_chunk_is_stored_with_a_crc32c_and_recorded_in_the_marker(store):
    meta = json.loads(metadata_file(store).read_text())
    if meta["zarr_format"] == 3:
        assert [c["name"] for c in meta["codecs"]][-1] == "crc32c"
    else:
        assert [f["id"] for f in meta["filters"]] == ["crc32c"]
    marker = zarr.open_array(str(store), mode="r").attrs["lazyfuel"]
    assert marker["complete"] is True and marker["chunk_count"] == 5
    assert marker["crc32c"] == [values_crc(X[i:i + 8]) for i in range(0, 40, 8)]
    assert all(chunk_file(store, i).exists() for i in range(5))  # the all-zero chunk too
    assert np.array_equal(read(store), X)


def test_a_missing_chunk_is_an_error_naming_it_not_fill_values(store):
    chunk_file(store, 3).unlink()
    with pytest.raises(DamagedStoreError, match=r"chunk \(3, 0\) \(key '(c/3/0|3\.0)'\) of the zarr array at "
                                                r".*x\.zarr is missing: lazyfuel wrote every chunk"):
        read(store)
    chunk_file(store, 2).unlink()  # the all-zero chunk: its fill values would be right, it is still damage
    with pytest.raises(DamagedStoreError, match=r"chunk \(2, 0\) .* is missing"):
        lf.from_zarr(store)[16:24].compute()


def test_swapped_chunks_are_an_error_naming_the_chunk(store):
    a, b = chunk_file(store, 0), chunk_file(store, 1)
    data_a, data_b = a.read_bytes(), b.read_bytes()
    a.write_bytes(data_b)
    b.write_bytes(data_a)
    with pytest.raises(DamagedStoreError, match=r"chunk \(1, 0\) .* does not hold what lazyfuel wrote there "
                                                r"\(crc32c of its values [0-9a-f]{8}, written [0-9a-f]{8}\)"):
        lf.from_zarr(store)[8:16].compute()
    with pytest.raises(DamagedStoreError, match=r"chunk \(0, 0\) .* does not hold what lazyfuel wrote"):
        lf.from_zarr(store)[:8].compute()
    assert np.array_equal(lf.from_zarr(store)[16:].compute(), X[16:])  # reads elsewhere still work


@pytest.mark.parametrize("damage", ["truncated", "flipped byte", "empty"])
def test_a_truncated_or_corrupted_chunk_is_an_error_naming_it(store, damage):
    path = chunk_file(store, 4)
    data = bytearray(path.read_bytes())
    if damage == "truncated":
        data = data[:len(data) // 2]
    elif damage == "flipped byte":
        data[len(data) // 2] ^= 0x40
    else:
        data = bytearray()
    path.write_bytes(bytes(data))
    with pytest.raises(DamagedStoreError, match=r"chunk \(4, 0\) \(key '(c/4/0|4\.0)'\) of the zarr array "
                                                r"at .*x\.zarr cannot be decoded \(.*\): it is truncated or "
                                                r"corrupted"):
        read(store)


@pytest.mark.parametrize("edit", ["shape", "dtype", "chunks", "marker"])
def test_metadata_that_disagrees_with_the_data_is_refused(store, edit):
    meta_path = metadata_file(store)
    meta = json.loads(meta_path.read_text())
    v3 = meta["zarr_format"] == 3
    if edit == "shape":
        meta["shape"] = [32, 6]
    elif edit == "dtype":
        if v3:
            meta["data_type"] = "int32"
        else:
            meta["dtype"] = "<i4"
    elif edit == "chunks":
        if v3:
            meta["chunk_grid"]["configuration"]["chunk_shape"] = [4, 6]
        else:
            meta["chunks"] = [4, 6]
    if edit != "marker":
        meta_path.write_text(json.dumps(meta))
    else:
        z = zarr.open_array(str(store), mode="r+")
        marker = dict(z.attrs["lazyfuel"])
        marker["crc32c"] = marker["crc32c"][:4]
        z.attrs["lazyfuel"] = marker
    wanted = {"shape": r"metadata shape \(32, 6\) but lazyfuel wrote \(40, 6\)",
              "dtype": r"metadata dtype <i4 but lazyfuel wrote <f4",
              "chunks": r"metadata chunks \(4, 6\) but lazyfuel wrote \(8, 6\)",
              "marker": r"has 5 chunks in its grid but its marker records 5 chunk\(s\) and 4 checksum"}[edit]
    with pytest.raises(DamagedStoreError, match=wanted):
        lf.from_zarr(store)  # refused when opened, before anything is read


def test_an_unchanged_store_reads_exactly_in_parts_and_through_ops(store):
    back = lf.from_zarr(store)
    assert back.chunks == ((8,) * 5, (6,))
    assert np.array_equal(back[3:37:3, ::-1].compute(), X[3:37:3, ::-1])
    assert np.array_equal(lf.index_select(back, 0, [39, 0, 17]).compute(), X[[39, 0, 17]])
