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
