"""The public API: exports, inputs of every kind, methods mirroring functions, running through
dask (compute, persist, np.asarray, zarr), one submit per fused block on Vulkan, and a 2-process
dask.distributed cluster where each worker has its own device pool."""

from __future__ import annotations

import doctest
import os
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest

import lazyfuel as lf
import lazyfuel.api
from lazyfuel.providers import available_backends, default_registry

A = np.random.default_rng(7).standard_normal((12, 10)).astype(np.float32)
CONTRACTS = Path(lf.__file__).parent / "contracts"


def same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    want = np.ascontiguousarray(want)
    return (got.shape == want.shape and got.dtype == want.dtype
            and np.array_equal(np.ascontiguousarray(got).reshape(-1).view(np.uint8),
                               want.reshape(-1).view(np.uint8)))


def test_exports_match_the_design():
    for name in ["Array", "from_array", "from_zarr", "asarray", "index_select", "gather", "masked_fill",
                 "transpose", "broadcast_to", "contiguous", "explain", "profile", "devices", "Registry",
                 "registry", "parse_contracts", "load_contracts", "ContractError", "NoBindingError",
                 "fft", "ifft", "rfft", "irfft"]:
        assert hasattr(lf, name), name
    assert set(lf.__all__) <= set(dir(lf))


def test_registries_and_contracts():
    assert lf.registry() is default_registry()
    assert len(lf.Registry()) == 0
    contracts = lf.parse_contracts(CONTRACTS / "cpu.md")
    assert {c.op_kind.name for c in contracts} >= {"IndexSelect", "Gather", "MaskedFill", "Contiguize"}
    fresh = lf.Registry()
    bindings = lf.load_contracts(str(CONTRACTS / "cpu.md"), registry=fresh)
    assert bindings and len(fresh) == len(bindings)
    before = len(lf.registry())
    assert lf.load_contracts(CONTRACTS / "cpu.md") and len(lf.registry()) == before  # same doc: no-op
    with pytest.raises(lf.ContractError) as err:
        lf.parse_contracts("---\nfkc_version: 1\n---\n")
    assert err.value.path == "<string>"
    with pytest.raises(lf.NoBindingError):
        lf.registry().lookup("Gather", ["F32", "F32", "F32"])


def test_devices_lists_what_vulkan_sees():
    found = lf.devices()
    assert isinstance(found, list)
    try:
        available_backends("vulkan")
    except RuntimeError:
        return
    assert found


def test_numpy_dask_and_lazyfuel_inputs_give_the_same_bits(backend):
    idx = np.array([9, 0, 3, 3])
    mask = np.arange(10) % 3 == 0
    want_select = np.take(A, idx, axis=1)
    for data in (A, da.from_array(A, chunks=5), lf.from_array(A, chunks=(5, 3))):
        for indices in (idx, da.from_array(idx, chunks=3), lf.asarray(idx)):
            assert same_bits(lf.index_select(data, 1, indices).compute(), want_select)
        for m in (mask, da.from_array(mask, chunks=4), lf.asarray(mask)):
            assert same_bits(lf.masked_fill(data, m, -2).compute(), np.where(mask, np.float32(-2), A))


def test_methods_mirror_the_functions(backend):
    x = lf.from_array(A, chunks=(4, 4))
    g = np.random.default_rng(0).integers(0, 12, size=(7, 10))
    assert x.index_select(0, [1]).name == lf.index_select(x, 0, [1]).name
    assert same_bits(x.gather(0, g).compute(), np.take_along_axis(A, g, axis=0))
    assert same_bits(x.masked_fill(A > 0, 0).compute(), np.where(A > 0, np.float32(0), A))
    assert same_bits(x.T.compute(), A.T)
    assert same_bits(x.transpose(1, 0).compute(), A.T) and x.transpose((1, 0)).name == x.T.name
    assert same_bits(x[::-2, 3:-1:3].compute(), A[::-2, 3:-1:3])
    assert same_bits(x[5].compute(), A[5]) and same_bits(x[..., -1].compute(), A[..., -1])
    assert same_bits(x.broadcast_to((2, 12, 10)).compute(), np.broadcast_to(A, (2, 12, 10)))
    assert same_bits(x.contiguous().compute(), A)
    assert (x.shape, x.dtype, x.ndim, x.chunks) == (A.shape, A.dtype, 2, ((4, 4, 4), (4, 4, 2)))
    assert len(x) == 12 and x.size == A.size and x.nbytes == A.nbytes
    assert "shape=(12, 10)" in repr(x)


def test_fft_family_methods_mirror_the_functions_and_run_through_dask(monkeypatch):
    monkeypatch.delenv("LAZYFUEL_BACKEND", raising=False)  # auto: a forced Vulkan has no FFT
    x = lf.from_array(A, chunks=(4, 4))  # the transform axis (10 points, 3 chunks) is rechunked
    for name in ("fft", "ifft", "rfft"):
        y = getattr(x, name)(axis=1, n=8, norm="ortho")
        assert y.name == getattr(lf, name)(x, 1, 8, "ortho").name and y.chunks == ((4, 4, 4), (y.shape[1],))
        (got,) = dask.compute(y)
        want = getattr(np.fft, name)(A.astype(np.float64), n=8, axis=1, norm="ortho")
        assert got.dtype == np.complex64 and np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
    back = x.rfft().irfft(n=10)
    assert back.dtype == np.float32 and np.abs(np.asarray(back) - A).max() <= 1e-5 * np.abs(A).max()
    with pytest.raises(TypeError, match="cast it first"):
        lf.rfft(np.arange(10))


def test_running_through_numpy_and_dask(backend):
    x = lf.from_array(A, chunks=5).T.index_select(0, [2, 2])
    assert same_bits(np.asarray(x), A.T[[2, 2]])
    assert same_bits(x.compute(scheduler="sync"), A.T[[2, 2]])
    assert same_bits(dask.compute(x)[0], A.T[[2, 2]])
    assert isinstance(x.persist(), lf.Array) and isinstance(dask.persist(x)[0], lf.Array)
    assert isinstance(x.to_dask(), da.Array)
    assert same_bits((x.to_dask() + 0).compute(), A.T[[2, 2]])
    assert dask.base.tokenize(x) == dask.base.tokenize(lf.from_array(A, chunks=5).T.index_select(0, [2, 2]))


def test_zarr_round_trip(backend, tmp_path):
    y = lf.from_array(A, chunks=(5, 4))[::-1].gather(1, np.zeros((12, 3), int)).masked_fill(
        np.array([True, False, True]), 1.5)
    want = np.where([True, False, True], np.float32(1.5), A[::-1][:, [0, 0, 0]])
    y.to_zarr(str(tmp_path / "out.zarr"))
    back = lf.from_zarr(tmp_path / "out.zarr")
    assert back.chunks == ((5, 5, 2), (3,))  # zarr chunks are regular: (2, 5, 5) was rechunked
    assert same_bits(back.compute(), want)
    assert same_bits(back.index_select(0, [11, 0]).compute(), want[[11, 0]])


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.uint16, np.uint64])
def test_new_dtypes_round_trip_through_zarr_and_npy(backend, tmp_path, dtype):
    """Issue 15: int8, int16, uint16 and uint64 are read and written as they are."""
    a = np.random.default_rng(8).integers(0, 256, 96, dtype=np.uint8).view(dtype).reshape(6, -1)
    y = lf.from_array(a, chunks=(4, 3)).index_select(0, [5, 0, 2])
    y.to_zarr(str(tmp_path / "out.zarr"))
    back = lf.from_zarr(tmp_path / "out.zarr")
    assert back.dtype == dtype and same_bits(back.compute(), a[[5, 0, 2]])
    np.save(tmp_path / "a.npy", a)
    mapped = lf.from_array(np.load(tmp_path / "a.npy", mmap_mode="r"), chunks=2)
    assert same_bits(mapped.T.contiguous().compute(), a.T)


def test_a_fused_chain_on_one_block_is_one_submit(vulkan):
    from lazyfuel.backends.vulkan import get_pool

    x = lf.from_array(A, chunks=A.shape)
    mask = np.arange(12) % 2 == 0
    y = lf.transpose(x).index_select(0, [9, 1, 4]).masked_fill(mask, 0.0)
    text = lf.explain(y)
    assert "inserted: index_select input source: contiguous: required (input is strided)" in text
    assert "masked_fill input mask: contiguous: required (input is broadcast_stride0)" in text
    y.compute()  # warm: the pool and pipelines are built
    pool = get_pool()
    before = pool.submits
    with lf.profile() as p:
        out = y.compute(scheduler="sync")
    assert pool.submits - before == 1
    assert same_bits(out, np.where(mask, np.float32(0), A.T[[9, 1, 4]]))
    assert p.submits == 1, f"profile saw {p}"


def test_doctests_of_the_api(monkeypatch):
    monkeypatch.setenv("LAZYFUEL_BACKEND", "cpu")
    assert doctest.testmod(lazyfuel.api).failed == 0


def _worker_pool() -> tuple[int, list[int]]:
    from lazyfuel.backends.vulkan import pool

    return os.getpid(), [id(p) for p in pool._pools.values()]


def test_distributed_two_process_workers_each_with_its_own_pool(vulkan):
    distributed = pytest.importorskip("distributed")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 48)).astype(np.float32)
    idx = rng.integers(0, 64, 100)
    mask = np.arange(100) % 3 == 0
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        y = lf.from_array(a, chunks=(16, 16)).index_select(0, idx).T.masked_fill(mask, 0.5)
        out = y.compute()
        seen = client.run(_worker_pool)
    assert same_bits(out, np.where(mask, np.float32(0.5), a[idx].T))
    pids = [pid for pid, _ in seen.values()]
    assert len(set(pids)) == 2 and os.getpid() not in pids
    assert all(len(pools) == 1 for _, pools in seen.values())  # each worker built its own pool


def test_compute_writes_blocks_into_the_result_instead_of_concatenating(monkeypatch):
    import dask.array.core

    real = dask.array.core.concatenate3

    def refuse(arrays):
        if any(a is not None and np.size(a) for a in dask.core.flatten(arrays)):  # store joins Nones
            raise AssertionError("compute concatenated the blocks")
        return real(arrays)

    monkeypatch.setattr(dask.array.core, "concatenate3", refuse)
    x = lf.from_array(A, chunks=(3, 5))
    for scheduler in ("threads", "sync"):
        assert same_bits(lf.index_select(x, 0, [7, 1, 4, 4]).compute(scheduler=scheduler), A[[7, 1, 4, 4]])


def test_compute_into_an_array_given(backend):
    """compute(out=): the blocks land in the caller's array (contiguous regions written by the
    kernels, others copied), on the local schedulers and through dask's own compute; wrong
    destinations are refused before anything runs."""
    x = lf.from_array(A, chunks=(5, 4))
    y = lf.masked_fill(lf.index_select(x, 0, [7, 1, 4, 4, 11, 0]), A[:6] > 0, -2.0)
    want = np.where(A[:6] > 0, np.float32(-2.0), A[[7, 1, 4, 4, 11, 0]])
    for scheduler in ("threads", "sync"):
        dest = np.full(want.shape, np.nan, np.float32)
        assert y.compute(out=dest, scheduler=scheduler) is dest and same_bits(dest, want)
    fortran = np.asfortranarray(np.full(want.shape, np.nan, np.float32))  # no block region is contiguous
    assert y.compute(out=fortran) is fortran and np.array_equal(fortran, want)
    transposed = np.full(A.shape[::-1], np.nan, np.float32)
    assert x.T.compute(out=transposed) is transposed and same_bits(transposed, A.T)
    with pytest.raises(ValueError, match=r"out has shape \(6, 9\); this array's shape is \(6, 10\)"):
        y.compute(out=np.empty((6, 9), np.float32))
    with pytest.raises(TypeError, match=r"out has dtype float64; this array's dtype is float32"):
        y.compute(out=np.empty((6, 10)))
    with pytest.raises(TypeError, match=r"out must be a numpy array, got list"):
        y.compute(out=[0.0] * 60)
    frozen = np.empty((6, 10), np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match=r"out is read-only"):
        y.compute(out=frozen)
