"""How a zarr array's chunks are stored (`graph.zarr_chunks`): raw C-order bytes give their dtype
(byte order included), compressed or F-order ones none; a source is cut into shards where there are
shards, else chunks."""

from __future__ import annotations

import numpy as np
import zarr

from lazyfuel.graph.zarr_chunks import raw_dtype, regular_chunks


def test_raw_chunks_give_their_bytes_dtype_and_compressed_ones_none(tmp_path) -> None:
    for fmt in (2, 3):
        raw = zarr.create_array(store=str(tmp_path / f"raw{fmt}.zarr"), shape=(8, 4), dtype=">i4",
                                chunks=(2, 4), compressors=None, zarr_format=fmt)
        # v2 keeps the dtype's byte order; v3's bytes codec says its own (zarr's default: little)
        assert raw_dtype(raw) == np.dtype(">i4" if fmt == 2 else "<i4") and regular_chunks(raw) == (2, 4)
        packed = zarr.create_array(store=str(tmp_path / f"z{fmt}.zarr"), shape=(8, 4), dtype="f4",
                                   chunks=(2, 4), zarr_format=fmt)  # zarr's default compressor
        assert raw_dtype(packed) is None
    f_order = zarr.create_array(store=str(tmp_path / "f.zarr"), shape=(8, 4), dtype="f4", chunks=(2, 4),
                                compressors=None, zarr_format=2, order="F")
    assert raw_dtype(f_order) is None


def test_a_sharded_array_is_cut_into_its_shards(tmp_path) -> None:
    arr = zarr.create_array(store=str(tmp_path / "s.zarr"), shape=(16, 4), dtype="f4", chunks=(2, 4),
                            shards=(8, 4), compressors=None)
    assert regular_chunks(arr) == (8, 4)
