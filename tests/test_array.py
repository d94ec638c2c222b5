"""`lazyfuel.array.Array`: described without running anything, its op methods each building one
graph node (views stay views), its dask array built once per runtime, and running it (numpy,
dask's protocol, persist, zarr's regular chunks, the device result refusing out=). The functions
over it are `lazyfuel.api`'s (tests/test_api.py)."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import zarr
from dask.base import tokenize

import lazyfuel as lf
from lazyfuel.array import Array, _regular
from lazyfuel.graph import ir

RNG = np.random.default_rng()


def fresh(shape=(7, 5), dtype=np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    want = np.ascontiguousarray(want)
    return (got.shape == want.shape and got.dtype == want.dtype
            and np.ascontiguousarray(got).tobytes() == want.tobytes())


def test_it_is_described_without_running(monkeypatch):
    a = fresh((7, 5))
    x = lf.from_array(a, chunks=(3, 5))
    monkeypatch.setattr(Array, "to_dask", lambda self: pytest.fail("lowered to describe"))
    assert (x.shape, x.dtype, x.ndim, x.chunks) == ((7, 5), np.float32, 2, ((3, 3, 1), (5,)))
    assert (x.size, x.nbytes, len(x)) == (35, 140, 7)
    assert x.name == x._given.name and isinstance(x.name, str)
    assert repr(x) == (f"lazyfuel.Array<{x._given.label}, shape=(7, 5), dtype=float32, "
                       "chunks=((3, 3, 1), (5,))>")
    y = x.index_select(1, da.from_array(np.array([4, 0]), chunks=1)[da.from_array(np.array([True, True]))])
    assert np.isnan(y.shape[1]) and np.isnan(y.size)  # a select on indices of unknown sizes


def test_len_of_a_0d_array_is_a_type_error():
    with pytest.raises(TypeError, match=r"len\(\) of a 0-d array"):
        len(lf.from_array(np.float32(3.0)))


def test_each_op_method_builds_one_node_of_its_kind():
    a = fresh((6, 4))
    x = lf.from_array(a, chunks=2)
    idx = np.array([3, 0, 0])
    assert isinstance(x.index_select(1, idx)._node, ir.IndexSelect)
    assert isinstance(x.gather(0, np.zeros((2, 4), np.int64))._node, ir.Gather)
    assert isinstance(x.masked_fill(a > 0, 0.0)._node, ir.MaskedFill)
    assert isinstance(x.T._node, ir.Transpose) and isinstance(x[::2]._node, ir.Slice)
    assert isinstance(x.broadcast_to((3, 6, 4))._node, ir.Broadcast)
    assert isinstance(x.contiguous()._node, ir.Contiguize) and x.contiguous()._node.inputs[0] is x._node
    for method, kind, shape in (("fft", "Fft", (6, 4)), ("ifft", "Ifft", (6, 4)), ("rfft", "Rfft", (4, 4))):
        y = getattr(x, method)(axis=0)
        assert (y._node.op_kind, y.shape, y.dtype) == (kind, shape, np.complex64)
    back = x.rfft(axis=0).irfft(axis=0)
    assert (back._node.op_kind, back.shape, back.dtype) == ("Irfft", (6, 4), np.float32)


def test_transpose_takes_axes_spread_out_in_one_tuple_or_none(backend):
    a = fresh((2, 3, 4))
    x = lf.from_array(a, chunks=(1, 2, 4))
    for got in (x.transpose(2, 0, 1), x.transpose((2, 0, 1)), x.transpose([2, 0, 1])):
        assert same_bits(got.compute(), a.transpose(2, 0, 1))
    for got in (x.T, x.transpose(), x.transpose(None)):
        assert same_bits(got.compute(), a.T)


def test_the_methods_give_numpys_bits(backend):
    a = fresh((9, 6))
    x = lf.from_array(a, chunks=(4, 3))
    idx = RNG.integers(0, 9, size=5)
    mask = RNG.random((9, 6)) < 0.5
    assert same_bits(x.index_select(0, idx).compute(), a[idx])
    g = RNG.integers(0, 6, size=(9, 2))
    assert same_bits(x.gather(1, g).compute(), np.take_along_axis(a, g, 1))
    assert same_bits(x.masked_fill(mask, -7.0).compute(), np.where(mask, np.float32(-7.0), a))
    assert same_bits(x[1::3, ::-2].contiguous().compute(), a[1::3, ::-2])


def test_its_dask_array_is_built_once_per_runtime(monkeypatch):
    monkeypatch.setenv("LAZYFUEL_BACKEND", "cpu")
    x = lf.from_array(fresh(), chunks=3).index_select(0, [1, 2])
    first = x.to_dask()
    assert x.to_dask() is first
    with lf.config(read_budget=0.5):
        other = x.to_dask()
        assert other is not first and x.to_dask() is other
        assert tokenize(x) != tokenize(lf.from_array(np.zeros(1)))
    assert x.to_dask() is first


def test_it_is_a_dask_collection_whose_token_names_the_runtime(backend):
    a = fresh((8, 3))
    x = lf.from_array(a, chunks=(3, 3)).index_select(0, [7, 0, 2])
    (got,) = dask.compute(x)
    assert same_bits(got, a[[7, 0, 2]])
    (held,) = dask.persist(x)
    assert isinstance(held, Array) and isinstance(held._node, ir.Source)
    assert same_bits(held.compute(), a[[7, 0, 2]])
    plain = tokenize(x)
    with lf.config(read_budget=0.5):
        assert tokenize(x) != plain


def test_persist_holds_computed_chunks_in_a_source(backend):
    a = fresh((5, 4))
    y = lf.from_array(a, chunks=2).masked_fill(a < 0, 0.0).persist()
    assert isinstance(y._node, ir.Source) and y.chunks == ((2, 2, 1), (2, 2))
    assert same_bits(np.asarray(y), np.where(a < 0, np.float32(0), a))
    assert np.asarray(y, dtype=np.float64).dtype == np.float64


def test_to_zarr_rechunks_uneven_chunks_to_the_largest_of_each_axis(tmp_path, monkeypatch):
    monkeypatch.setenv("LAZYFUEL_BACKEND", "cpu")
    a = fresh((10, 4))
    y = lf.from_array(a, chunks=(3, 4))[::-1]  # chunks (1, 3, 3, 3): zarr stores only regular ones
    assert y.chunks[0] == (1, 3, 3, 3)
    y.to_zarr(str(tmp_path / "y.zarr"))
    stored = zarr.open_array(str(tmp_path / "y.zarr"), mode="r")
    assert stored.chunks == (3, 4) and same_bits(stored[...], a[::-1])


def test_regular_chunks_are_equal_but_a_smaller_last():
    assert _regular((3, 3, 1)) and _regular((3,)) and _regular((2, 2))
    assert not _regular((1, 3, 3)) and not _regular((3, 2, 3)) and not _regular((2, 3))


def test_a_device_result_takes_no_out():
    x = lf.from_array(fresh(), chunks=3)
    with pytest.raises(ValueError, match=r"compute\(device=True\) returns a DeviceArray; out= is for host "):
        x.compute(out=np.empty((7, 5), np.float32), device=True)


def test_out_sharing_memory_with_what_the_graph_reads_is_refused_before_anything_runs():
    a = fresh((6, 4))
    with pytest.raises(ValueError, match=r"out shares memory with the data of index_select \(shape \(2, 2\), "
                       r"float32\), which this computation reads while it writes out"):
        lf.from_array(a, chunks=2).index_select(0, [5, 4, 3, 2, 1, 0]).compute(out=a)
    out = np.zeros((3, 4), np.float32)
    mask = out.view(np.uint8)[:, ::4].view(bool)  # the first byte of each element of out
    x = lf.from_array(fresh((3, 4)), chunks=2)
    with pytest.raises(ValueError, match=r"out shares memory with the mask of masked_fill"):
        x.masked_fill(mask, 1.0).compute(out=out)
    assert not out.any()  # nothing ran
