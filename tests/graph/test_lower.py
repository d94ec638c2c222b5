"""Lowered graphs compute bit-equal to numpy: random shapes, chunkings (uneven too), dims
(negative too), dtypes, views (transposed, sliced, reversed, broadcast) and chains of ops, with
concrete and lazy indices and masks; in dask's legacy and expression modes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import dask
import dask.array as da
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazyfuel as lf

DTYPES = [np.float32, np.float64, np.float16, np.int64, np.int32, np.uint8, np.uint32, np.bool_,
          np.complex64]
NEW_DTYPES = [np.int8, np.int16, np.uint16, np.uint64]  # issue 15: supported since then
INDEX_DTYPES = [np.int64, np.int32, np.uint8, np.uint16, np.uint64, np.int8]


@st.composite
def chunking(draw: st.DrawFn, n: int) -> tuple[int, ...]:
    if n == 0:
        return (0,)
    sizes = []
    while n:
        size = draw(st.integers(1, n))
        sizes.append(size)
        n -= size
    return tuple(sizes)


@st.composite
def source(draw: st.DrawFn, dtypes: list = DTYPES) -> tuple[lf.Array, np.ndarray]:
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=3)))
    dtype = np.dtype(draw(st.sampled_from(dtypes)))
    seed = draw(st.integers(0, 2**16))
    raw = np.random.default_rng(seed).integers(0, 256, size=int(np.prod(shape)) * dtype.itemsize,
                                               dtype=np.uint8)
    if dtype == np.bool_:
        raw = raw % 2
    a = raw.view(dtype).reshape(shape)  # every bit pattern, NaN payloads included
    chunks = tuple(draw(chunking(n)) for n in shape)
    if draw(st.integers(0, 3)) == 0:  # given in the other byte order: converted where it is read
        return lf.from_array(a.astype(a.dtype.newbyteorder("S")), chunks=chunks), a
    return lf.from_array(a, chunks=chunks), a


def maybe_lazy(draw: st.DrawFn, values: np.ndarray) -> object:
    kind = draw(st.sampled_from(["numpy", "numpy", "dask", "lazyfuel"]))
    if kind == "numpy":
        return values
    chunks = max(1, draw(st.integers(1, 4)))
    d = da.from_array(values, chunks=chunks)
    lazyfuel_dtype = values.dtype in (np.int32, np.int64, np.uint8, np.uint32, np.bool_, *NEW_DTYPES)
    return lf.asarray(d) if kind == "lazyfuel" and lazyfuel_dtype else d


def step(draw: st.DrawFn, x: lf.Array, ref: np.ndarray) -> tuple[lf.Array, np.ndarray]:
    op = draw(st.sampled_from(["T", "slice", "index_select", "gather", "masked_fill", "contiguous",
                               "broadcast"]))
    if op in ("index_select", "gather") and 0 in ref.shape:
        op = "T"
    if op == "T":
        axes = tuple(draw(st.permutations(range(ref.ndim))))
        return x.transpose(axes), ref.transpose(axes)
    if op == "slice":
        key = tuple(slice(draw(st.integers(-n, n)) if n else None, None,
                          draw(st.sampled_from([1, 2, -1, -2, 3]))) for n in ref.shape)
        return x[key], ref[key]
    if op == "contiguous":
        return lf.contiguous(x), ref
    if op == "broadcast":
        shape = (draw(st.integers(1, 3)), *ref.shape)
        return lf.broadcast_to(x, shape), np.broadcast_to(ref, shape)
    dim = draw(st.integers(-ref.ndim, ref.ndim - 1))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    if op == "index_select":
        idx = rng.integers(0, ref.shape[dim], size=draw(st.integers(0, 8)))
        idx = idx.astype(draw(st.sampled_from(INDEX_DTYPES)))
        return lf.index_select(x, dim, maybe_lazy(draw, idx)), np.take(ref, idx.astype(np.int64), axis=dim)
    if op == "gather":
        shape = list(ref.shape)
        shape[dim] = draw(st.integers(0, 7))
        idx = rng.integers(0, ref.shape[dim], size=shape)
        return lf.gather(x, dim, maybe_lazy(draw, idx)), np.take_along_axis(ref, idx, axis=dim)
    k = draw(st.integers(0, ref.ndim))
    mshape = tuple(1 if draw(st.booleans()) else n for n in ref.shape[ref.ndim - k:])
    if draw(st.integers(0, 3)) == 0:  # a mask larger than the data: the data is stretched up
        lead = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
        mshape = lead + tuple(draw(st.integers(2, 3)) if n == 1 else n for n in ref.shape)
    mask = rng.random(mshape) < 0.5
    value = draw(st.sampled_from([0, 1, True]))
    fill = np.asarray(value).astype(ref.dtype)
    return lf.masked_fill(x, maybe_lazy(draw, mask), value), np.where(mask, fill, ref)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(data=st.data())
def test_random_pipelines_are_bit_equal_to_numpy(backend, bits_equal, data):
    x, ref = data.draw(source())
    for _ in range(data.draw(st.integers(1, 4))):
        x, ref = step(data.draw, x, ref)
    assert x.shape == ref.shape and x.dtype == ref.dtype
    bits_equal(x.compute(scheduler="threads"), ref)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(data=st.data())
def test_random_pipelines_of_int8_int16_uint16_uint64_are_bit_equal_to_numpy(backend, bits_equal, data):
    x, ref = data.draw(source(NEW_DTYPES))
    for _ in range(data.draw(st.integers(1, 4))):
        x, ref = step(data.draw, x, ref)
    assert x.shape == ref.shape and x.dtype == ref.dtype
    bits_equal(x.compute(scheduler="threads"), ref)


def test_a_mask_larger_than_the_data_gives_np_where_s_shape_and_bits(backend, bits_equal):
    """Issue 15: the data is stretched up to the common shape (numpy's where, torch's out-of-place
    masked_fill), for concrete and lazy masks, every new dtype and a 0-d data value."""
    rng = np.random.default_rng(15)
    for dtype in (np.float32, np.int8, np.int16, np.uint16, np.uint64, np.complex128):
        data = rng.integers(0, 256, 25 * np.dtype(dtype).itemsize, dtype=np.uint8).view(dtype)
        mask = rng.random((2, 1)) < 0.5
        fill = np.asarray(7).astype(dtype)
        got = lf.masked_fill(lf.from_array(data, chunks=10), mask, 7).compute()
        bits_equal(got, np.where(mask, fill, data))
    data = rng.standard_normal((1, 7, 1)).astype(np.float32)
    mask = rng.random((3, 5, 7, 4)) < 0.5
    lazy = da.from_array(mask, chunks=(2, 5, 3, 4))
    bits_equal(lf.masked_fill(data, lazy, 0.5).compute(), np.where(mask, np.float32(0.5), data))
    bits_equal(lf.masked_fill(lf.from_array(data).T, mask[..., :1, :], -1).compute(),
               np.where(mask[..., :1, :], np.float32(-1), data.T))
    bits_equal(lf.masked_fill(np.int16(9), np.array([True, False]), 1).compute(), np.array([1, 9], np.int16))


def test_index_select_along_a_chunked_axis_with_repeats_and_reversal(backend, bits_equal):
    a = np.random.default_rng(0).standard_normal((40, 7)).astype(np.float32)
    x = lf.from_array(a, chunks=(6, 3))
    idx = np.concatenate([np.arange(40)[::-1], [3, 3, 39, 0]])
    bits_equal(lf.index_select(x, 0, idx).compute(), a[idx])
    bits_equal(lf.index_select(x[::-3].T, 1, [0, 13, 5]).compute(), a[::-3].T[:, [0, 13, 5]])


def test_gather_along_a_chunked_axis_matches_take_along_axis(backend, bits_equal):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((9, 11, 4))
    idx = rng.integers(0, 11, size=(9, 23, 4))
    x = lf.from_array(a, chunks=(4, 3, 2))
    bits_equal(lf.gather(x, -2, idx).compute(), np.take_along_axis(a, idx, axis=1))
    lazy = da.from_array(idx, chunks=(5, 7, 4))
    bits_equal(lf.gather(x, 1, lazy).compute(), np.take_along_axis(a, idx, axis=1))


def test_zero_d_inputs_behave_as_one_element_along_dim_0(backend, bits_equal):
    s = np.array(2.5, np.float32)
    bits_equal(lf.index_select(s, 0, [0]).compute(), s)
    bits_equal(lf.index_select(s, -1, da.from_array(np.array([0]))).compute(), s)
    bits_equal(lf.gather(s, 0, np.array(0)).compute(), s)
    bits_equal(lf.gather(s, 0, [0, 0]).compute(), np.array([2.5, 2.5], np.float32))
    bits_equal(lf.masked_fill(s, np.array(True), 1).compute(), np.array(1, np.float32))
    v = np.arange(5.0)
    bits_equal(lf.index_select(v, 0, np.array(3)).compute(), v[[3]])
    bits_equal(lf.gather(v, 0, np.array(4)).compute(), np.array(4.0))


def test_empty_results_and_empty_indices(backend, bits_equal):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    bits_equal(lf.index_select(a, 1, np.array([], np.int64)).compute(), a[:, :0])
    bits_equal(lf.gather(a, 0, np.zeros((0, 4), int)).compute(), a[:0])
    bits_equal(lf.from_array(a)[2:1].masked_fill(np.ones(4, bool), 0).compute(), a[2:1])


def test_lazy_indices_are_checked_when_computed(backend, bits_equal):
    x = lf.from_array(np.arange(10.0), chunks=4)
    y = lf.index_select(x, 0, da.from_array(np.array([1, 2, 3, 10, 0]), chunks=2))  # builds fine
    try:
        y.compute(scheduler="sync")
    except IndexError as err:
        assert "index 10 at position 3 is out of range; expected 0 <= index < 10" in str(err)
    else:
        raise AssertionError("no IndexError")


def test_dask_compute_and_persist_take_lazyfuel_arrays(backend, bits_equal):
    a = np.arange(20, dtype=np.int32).reshape(4, 5)
    x = lf.from_array(a, chunks=2)
    y = x.T.index_select(0, [4, 0])
    got, plain = dask.compute(y, x[::-1])
    bits_equal(got, a.T[[4, 0]])
    bits_equal(plain, a[::-1])
    (held,) = dask.persist(y)
    assert isinstance(held, lf.Array)
    bits_equal(held.compute(), a.T[[4, 0]])
    mask = np.array([[True], [False]])
    bits_equal(y.persist().masked_fill(mask, -1).compute(),
               np.where(mask, -1, a.T[[4, 0]]).astype(np.int32))


def test_expression_mode_gives_the_same_results():
    """dask's array-expression mode must be chosen before dask.array is imported: a subprocess."""
    code = textwrap.dedent("""
        import dask.array as da, dask, numpy as np, lazyfuel as lf
        assert da.array_expr_enabled()
        a = np.arange(48, dtype=np.float32).reshape(6, 8)
        x = lf.from_array(a, chunks=(4, 3))
        y = x.T.index_select(1, [5, 0, 2]).masked_fill(np.array([True, False, True]), -1)
        want = np.where([True, False, True], np.float32(-1), a.T[:, [5, 0, 2]])
        assert np.array_equal(y.compute(), want)
        assert np.array_equal(dask.compute(y)[0], want)
        assert np.array_equal(y.persist().compute(), want)
        g = lf.gather(x, 0, da.from_array(np.zeros((9, 8), int), chunks=4))
        assert np.array_equal(g.compute(), np.zeros((9, 8), np.float32) + a[0])
        print("ok")
    """)
    env = dict(os.environ, DASK_ARRAY__QUERY_PLANNING="True", LAZYFUEL_BACKEND="cpu")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
