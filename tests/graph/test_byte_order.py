"""Data, indices and masks in non-native byte order (`>i4`, `>f8` on this machine) are converted
to native order once, where they are read, and give numpy's values (issue 15)."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import zarr

import lazyfuel as lf
from lazyfuel.graph.ir import HASHED_INDEX_BYTES

RNG = np.random.default_rng(1515)
SWAPPED = [">i4", ">f8", ">c16", ">u2", ">i8", ">f2", ">u8", ">i2", ">c8", ">u4", ">f4"]


def swapped(a: np.ndarray) -> np.ndarray:
    """`a` in the other byte order (same values)."""
    out = a.astype(a.dtype.newbyteorder("S"))
    assert not out.dtype.isnative
    return out


def random_bits(dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """Native data of every bit pattern (NaN payloads included)."""
    dtype = np.dtype(dtype).newbyteorder("=")
    n = int(np.prod(shape)) * dtype.itemsize
    return RNG.integers(0, 256, n, dtype=np.uint8).view(dtype).reshape(shape)


@pytest.mark.parametrize("stored", SWAPPED)
def test_numpy_data_in_either_order_gives_numpy_s_values(backend, bits_equal, stored):
    a = random_bits(stored, (9, 7))
    x = lf.from_array(swapped(a), chunks=(4, 3))
    assert x.dtype == a.dtype and x.dtype.isnative
    idx = np.array([6, 0, 3, 3])
    bits_equal(x.index_select(1, idx).compute(), a[:, idx])
    gidx = RNG.integers(0, 9, (5, 7))
    bits_equal(x.gather(0, gidx).compute(), np.take_along_axis(a, gidx, 0))
    mask = RNG.random((9, 7)) < 0.5
    bits_equal(x.T.masked_fill(mask.T, 1).compute(), np.where(mask.T, np.asarray(1).astype(a.dtype), a.T))
    bits_equal(x[::-2].compute(), a[::-2])
    bits_equal(np.asarray(x), a)


def test_dask_and_zarr_sources_are_converted_per_chunk(backend, bits_equal, tmp_path):
    a = random_bits(np.float64, (10, 6))
    d = da.from_array(swapped(a), chunks=(3, 6))
    bits_equal(lf.index_select(d, 0, [9, 0, 4]).compute(), a[[9, 0, 4]])
    store = zarr.create_array(str(tmp_path / "be.zarr"), shape=a.shape, chunks=(4, 4), dtype=">i4",
                              zarr_format=2)
    ints = random_bits(np.int32, a.shape)
    store[:] = swapped(ints)
    z = lf.from_zarr(str(tmp_path / "be.zarr"))
    assert z.dtype == np.int32
    bits_equal(z.gather(1, np.zeros((10, 2), int)).compute(), ints[:, [0, 0]])
    z.index_select(0, [1, 2]).to_zarr(str(tmp_path / "out.zarr"))
    bits_equal(np.asarray(zarr.open_array(str(tmp_path / "out.zarr"))[:]), ints[[1, 2]])


def test_npy_files_in_the_other_order_as_graph_inputs_read_them(backend, bits_equal, tmp_path):
    a = random_bits(np.uint16, (8, 3))
    np.save(tmp_path / "be.npy", swapped(a))
    x = lf.from_array(np.load(tmp_path / "be.npy", mmap_mode="r"), chunks=(3, 3))
    bits_equal(x.index_select(0, [7, 1]).compute(), a[[7, 1]])


@pytest.mark.parametrize("stored", [">i8", ">u2", ">i4", ">u8", ">i2"])
def test_indices_in_the_other_order_concrete_lazy_and_large(backend, bits_equal, stored):
    a = random_bits(np.float32, (40, 5))
    idx = RNG.integers(0, 40, 23).astype(np.dtype(stored).newbyteorder("="))
    assert not np.dtype(stored).isnative
    x = lf.from_array(a, chunks=(16, 5))
    bits_equal(x.index_select(0, swapped(idx)).compute(), a[idx])
    bits_equal(x.index_select(0, da.from_array(swapped(idx), chunks=7)).compute(), a[idx])
    g = RNG.integers(0, 40, (11, 5)).astype(idx.dtype)
    bits_equal(x.gather(0, da.from_array(swapped(g), chunks=4)).compute(), np.take_along_axis(a, g, 0))
    if idx.dtype.itemsize >= 4:  # past HASHED_INDEX_BYTES: kept as they are, handed to each task
        rows = random_bits(np.float32, (1 << 15, 2))  # output blocks as long as its one chunk
        big = RNG.integers(0, 1 << 15, HASHED_INDEX_BYTES // idx.dtype.itemsize + 5).astype(idx.dtype)
        bits_equal(lf.from_array(rows, chunks=-1).index_select(0, swapped(big)).compute(), rows[big])


def test_a_mask_given_through_a_swapped_source_and_bool_masks_of_any_order(backend, bits_equal):
    a = random_bits(np.int16, (6, 4))
    mask = RNG.random((6, 4)) < 0.5
    as_big = mask.astype(np.dtype("?").newbyteorder(">"))  # bool has no byte order: the same dtype
    bits_equal(lf.masked_fill(swapped(a), as_big, 3).compute(), np.where(mask, np.int16(3), a))
    lazy = da.from_array(mask, chunks=2)
    bits_equal(lf.masked_fill(lf.from_array(swapped(a), chunks=3), lazy, -2).compute(),
               np.where(mask, np.int16(-2), a))


def test_explain_says_where_the_conversion_happens():
    x = lf.from_array(swapped(np.arange(12, dtype=np.int32).reshape(3, 4)), chunks=2)
    idx = da.from_array(swapped(np.array([3, 0], np.uint16)))
    text = lf.explain(lf.index_select(x, 1, idx))
    assert "(3, 4): stored as >i4 (non-native byte order); each chunk is converted to native int32 once " \
           "as it is read" in text
    assert "(2,): stored as >u2 (non-native byte order)" in text
    assert "byte order" not in lf.explain(lf.index_select(np.arange(4), 0, [1]))


def test_kernels_called_directly_name_the_byte_order():
    from lazyfuel.backends.cpu.kernels import contiguize
    with pytest.raises(TypeError, match=r"numpy dtype >i4 is in non-native byte order; kernels take int32"):
        contiguize(swapped(np.zeros(3, np.int32)))
