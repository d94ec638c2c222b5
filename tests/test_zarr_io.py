"""Writing and reading zarr arrays (`zarr_io`): a written store reads back bit-exact through its
checksums, is published whole beside its path (no temporary left), and what a write cannot honour
is refused by name."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from lazyfuel import integrity, zarr_io


def test_a_written_array_reads_back_bit_exact_through_its_checksums(tmp_path, bits_equal) -> None:
    data = np.random.default_rng(61).standard_normal((9, 6)).astype(np.float32)
    url = tmp_path / "out.zarr"
    assert zarr_io.write(da.from_array(data, chunks=(4, 3)), str(url), None, False, True, {}) is None
    assert url.is_dir() and [p.name for p in tmp_path.iterdir()] == ["out.zarr"]  # published, no temp left
    z, reader = zarr_io.open_checked(str(url))
    assert isinstance(reader, integrity.VerifiedChunks) and z.shape == (9, 6)
    bits_equal(zarr_io.read(str(url)).compute(), data)
    assert zarr_io.local_path(str(url), None) == url.resolve()
    assert zarr_io.local_path("s3://bucket/x.zarr", None) is None


def test_what_a_write_cannot_honour_is_refused_by_name(tmp_path) -> None:
    import zarr

    arr = da.zeros((4,), chunks=2)
    with pytest.raises(TypeError, match=r"to_zarr takes a path, URL or zarr store, not a zarr Array"):
        zarr_io.write(arr, zarr.zeros((4,)), None, False, True, {})
    with pytest.raises(TypeError, match=r"region.*lazyfuel writes whole arrays"):
        zarr_io.write(arr, str(tmp_path / "r.zarr"), None, False, True, {"region": None})
    zarr_io.write(arr, str(tmp_path / "e.zarr"), None, False, True, {})
    with pytest.raises(FileExistsError):
        zarr_io.write(arr, str(tmp_path / "e.zarr"), None, False, True, {})


@pytest.mark.parametrize("dtype", ["float32", "<u2", "int8", "float64", "complex64", "bool"])
def test_whole_raw_chunks_are_written_as_their_files_byte_for_byte_as_zarr_writes_them(tmp_path, bits_equal,
                                                                                       monkeypatch, dtype):
    import zarr
    from zarr.codecs import BytesCodec, Crc32cCodec

    rng = np.random.default_rng(62)
    data = (rng.standard_normal((70, 12)) * 100).astype(dtype)  # 70 rows in chunks of 16: an edge chunk
    through_zarr = []
    original = zarr.Array.__setitem__

    def counted(self, key, value):  # type: ignore[no-untyped-def]
        through_zarr.append(key)
        return original(self, key, value)

    monkeypatch.setattr(zarr.Array, "__setitem__", counted)
    url = tmp_path / "out.zarr"
    zarr_io.write(da.from_array(data, chunks=(16, 12)), str(url), None, False, True, {"compressors": None})
    assert len(through_zarr) == 1  # only the edge chunk (zarr pads it) went through zarr's codecs
    monkeypatch.setattr(zarr.Array, "__setitem__", original)
    bits_equal(zarr_io.read(str(url)).compute(), data)  # each chunk checked against the marker's crc32c
    bits_equal(zarr.open_array(str(url), mode="r")[...], data)  # zarr checks each chunk's own crc32c
    ref = zarr.create_array(store=str(tmp_path / "ref.zarr"), shape=data.shape, dtype=data.dtype,
                            chunks=(16, 12), serializer=BytesCodec(), compressors=[Crc32cCodec()],
                            config={"write_empty_chunks": True})
    ref[...] = data
    for chunk in range(5):
        assert (url / "c" / str(chunk) / "0").read_bytes() == (tmp_path / "ref.zarr" / "c" / str(chunk) / "0"
                                                              ).read_bytes()


@pytest.mark.parametrize("dtype", [">f8", ">i4", ">u2"])
def test_a_foreign_byte_order_is_written_in_native_order_and_reads_back(tmp_path, bits_equal, dtype) -> None:
    data = np.random.default_rng(5).integers(0, 1000, (6, 5)).astype(dtype)
    zarr_io.write(da.from_array(data, chunks=(4, 5)), tmp_path / "be.zarr", None, False, True, {})
    back = zarr_io.read(tmp_path / "be.zarr").compute()  # was a DamagedStoreError: the record said >f8
    assert back.dtype == data.dtype.newbyteorder("=")
    bits_equal(back, data.astype(back.dtype))
