"""Resident arrays and results on the device (issue 18 items 1 and 2), on the real pool.

`x.persist(device=True)` keeps every block in the pool's memory (`residency.ResidentBlock`): a
later compute binds them as program inputs, uploading only its indices and masks (counted with
`lf.profile` in staged mode); under a small `device_memory_budget` blocks spill to host memory
and come back bit-exact; the memory goes back when the last Array holding it goes.
`y.compute(device=True)` is one `lf.DeviceArray`, assembled on the device, which `np.from_dlpack`
reads in place on lavapipe (host-visible memory). Every result is compared bitwise with numpy on
fresh random data.
"""

from __future__ import annotations

import gc
import itertools
import math
import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazyfuel as lf
from lazyfuel import dlpack
from lazyfuel.backends.vulkan.memtypes import Mode
from lazyfuel.backends.vulkan.residency import ResidentBlock, store_of
from lazyfuel.backends.vulkan.shared import hand_off
from lazyfuel.backends.vulkan.transfer import in_mode
from lazyfuel.graph.kept_indices import KEPT


def _within_chunks(rng: np.random.Generator, n: int, chunk: int) -> np.ndarray:
    """A permutation of 0..n-1 that keeps each index inside its chunk of `chunk` rows."""
    return np.concatenate([lo + rng.permutation(min(chunk, n - lo)) for lo in range(0, n, chunk)])


def _blocks(arr: lf.Array) -> list:
    """The chunks a persisted Array's graph holds."""
    dsk = arr.to_dask()
    graph = dsk.__dask_graph__()
    from dask.core import flatten

    return [graph[k] for k in flatten(dsk.__dask_keys__())]


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    return got.shape == want.shape and got.dtype == want.dtype and got.tobytes() == want.tobytes()


@pytest.fixture
def data():
    rng = np.random.default_rng()
    a = rng.standard_normal((96, 40)).astype(np.float32)
    idx = _within_chunks(rng, 96, 24)
    mask = rng.random((96, 1)) < 0.4
    return a, idx, mask


def _read(r: lf.DeviceArray) -> np.ndarray:
    """The result's values: in place where it is a CPU DLPack (lavapipe), else a host copy."""
    return np.from_dlpack(r) if r.__dlpack_device__()[0] == dlpack.CPU else np.asarray(r)


@pytest.fixture
def mapped(pool):
    """The pool, where its device memory is host-visible (lavapipe): a CPU DLPack reads results in
    place (on a discrete GPU see test_vulkan_shared_cuda_handoff.py)."""
    if not pool.allocator.direct:
        pytest.skip(f"{pool.label}'s device memory is not host-visible here (no CPU DLPack)")
    return pool


def test_persisted_blocks_are_resident_handles(vulkan, pool, data):
    a, _, _ = data
    xp = lf.from_array(a, chunks=(24, 20)).persist(device=True)
    blocks = _blocks(xp)
    assert len(blocks) == 8 and all(isinstance(b, ResidentBlock) for b in blocks)
    assert all(b.pool is pool and not b.spilled for b in blocks)
    assert _same(xp.compute(), a)
    block = pickle.loads(pickle.dumps(blocks[0]))  # a handle travels as its bytes
    assert isinstance(block, np.ndarray) and _same(block, a[:24, :20])


def test_second_compute_uploads_only_indices_and_masks(vulkan, pool, data):
    a, idx, mask = data
    x = lf.from_array(a, chunks=(24, 40))
    want = np.where(mask, np.float32(-1), a[idx])
    with in_mode(pool, Mode.STAGED), lf.profile() as plain:  # every host byte through staging
        assert _same(x.index_select(0, idx).masked_fill(mask, -1).compute(), want)
    assert plain.bytes_uploaded >= a.nbytes  # the host array goes up
    xp = x.persist(device=True)
    with in_mode(pool, Mode.STAGED), lf.profile() as p:
        got = xp.index_select(0, idx).masked_fill(mask, -1).compute()
    assert _same(got, want)
    assert 0 < p.bytes_uploaded <= idx.size * 4 + mask.size  # U32 indices and bool masks only
    assert p.bytes_downloaded == want.nbytes
    assert sum(n for (backend, _), n in p.where.items() if backend == "Vulkan") == p.programs == 4


def test_computed_blocks_stay_on_the_device(vulkan, pool, data):
    a, idx, mask = data
    y = lf.from_array(a, chunks=(24, 40)).index_select(0, idx)
    with lf.profile() as p:
        yp = y.persist(device=True)
    assert p.bytes_downloaded == 0  # results kept where the kernels wrote them
    assert all(isinstance(b, ResidentBlock) for b in _blocks(yp))
    with in_mode(pool, Mode.STAGED), lf.profile() as p:
        got = yp.masked_fill(mask, 3).compute()
    assert _same(got, np.where(mask, np.float32(3), a[idx]))
    assert p.bytes_uploaded <= mask.size


def test_blocks_computed_at_once_end_under_the_budget(vulkan):
    # many threads reserve blocks while others are still pinned (seen on the H200's 16 threads):
    # the store may pass its budget while they run, but not after
    a = np.random.default_rng(5).standard_normal((192, 40)).astype(np.float32)
    idx = np.random.default_rng(6).permutation(192)
    block_bytes = 24 * 40 * 4
    budget = 2 * block_bytes + 100
    xp = lf.index_select(lf.from_array(a, chunks=(24, 40)), 0, idx).persist(
        device=True, device_memory_budget=budget, scheduler="threads", num_workers=8)
    blocks = _blocks(xp)
    assert sum(not b.spilled for b in blocks) <= 2
    assert _same(xp.compute(), a[idx])


def test_blocks_read_at_once_end_under_the_budget(vulkan):
    # a compute over spilled blocks brings them back at once, each pinned by its batch (seen on the
    # H200's 16 threads: every block back on the device, none spilled, after the compute)
    a = np.random.default_rng(7).standard_normal((192, 40)).astype(np.float32)
    block_bytes = 24 * 40 * 4
    budget = 2 * block_bytes + 100
    xp = lf.from_array(a, chunks=(24, 40)).persist(device=True, device_memory_budget=budget)
    blocks = _blocks(xp)
    for _ in range(3):
        got = (xp.index_select(0, np.arange(191, -1, -1)).masked_fill(a[:, :1] > 0, -1)
               .compute(device_memory_budget=budget, scheduler="threads", num_workers=8))
        assert _same(got, np.where(a[:, :1] > 0, np.float32(-1), a[::-1]))
        assert sum(not b.spilled for b in blocks) <= 2


def test_cpu_steps_download_resident_blocks(monkeypatch, data):
    from tests.conftest import force_backend

    a, idx, mask = data
    xp = lf.from_array(a, chunks=(24, 40)).persist(device=True)
    force_backend("cpu", monkeypatch)
    with lf.profile() as p:
        got = xp.index_select(0, idx).masked_fill(mask, -1).compute()
    assert _same(got, np.where(mask, np.float32(-1), a[idx]))
    assert p.bytes_downloaded == a.nbytes  # each block read once, counted


def test_blocks_spill_under_a_small_budget_and_come_back_bit_exact(vulkan, data):
    a, idx, mask = data
    block_bytes = 24 * 40 * 4
    budget = 2 * block_bytes + 100
    xp = lf.from_array(a, chunks=(24, 40)).persist(device=True, device_memory_budget=budget)
    blocks = _blocks(xp)
    assert sum(b.spilled for b in blocks) == 2 and sum(b.spills for b in blocks) >= 2
    got = xp.index_select(0, idx).masked_fill(mask, -1).compute(device_memory_budget=budget)
    assert _same(got, np.where(mask, np.float32(-1), a[idx]))
    assert sum(b.spilled for b in blocks) >= 2  # still under the budget after bringing them back
    assert sum(b.spills for b in blocks) > 2
    assert _same(xp.compute(), a)


def test_a_block_over_the_budget_is_a_memory_error_naming_sizes(vulkan, data):
    a, _, _ = data
    with pytest.raises(MemoryError, match=r"resident block of 3840 bytes is larger than the device "
                                          r"memory budget of 1000 bytes"):
        lf.from_array(a, chunks=(24, 40)).persist(device=True, device_memory_budget=1000)


def test_resident_memory_goes_when_the_last_array_goes(vulkan, mapped, data):
    pool = mapped
    a, idx, mask = data
    gc.collect()
    store = store_of(pool)
    before_store, before_pool = store.device_bytes, pool.allocator.in_use
    xp = lf.from_array(a, chunks=(24, 40)).persist(device=True)
    y = xp.index_select(0, idx).masked_fill(mask, 1)
    r = y.compute(device=True)
    view = np.from_dlpack(r)
    kept = sum(KEPT.bytes_on(home) for home in {key[2] for key in KEPT._entries})  # y's indices
    assert store.device_bytes == before_store + 2 * a.nbytes + kept  # the blocks, the result
    assert pool.allocator.in_use >= before_pool + 2 * a.nbytes + kept
    del xp, y
    gc.collect()
    assert store.device_bytes == before_store + a.nbytes  # the result stays while it is read (y's
    # indices went with y)
    del r
    gc.collect()
    assert store.device_bytes == before_store + a.nbytes  # ... through the view alone
    assert _same(view, np.where(mask, np.float32(1), a[idx]))
    del view
    gc.collect()
    assert store.device_bytes == before_store and pool.allocator.in_use == before_pool


@pytest.mark.parametrize("chunks", [(96, 40), (24, 40), (24, 16), (96, 7)])
def test_device_result_is_one_array_read_in_place(vulkan, mapped, data, chunks):
    pool = mapped
    a, idx, mask = data
    r = lf.from_array(a, chunks=chunks).index_select(0, idx).masked_fill(mask, -1).compute(device=True)
    assert isinstance(r, lf.DeviceArray)
    assert (r.shape, r.dtype, r.device) == ((96, 40), np.float32, pool.label)
    assert r.__dlpack_device__() == (1, 0)  # lavapipe: host-visible memory, a CPU DLPack
    want = np.where(mask, np.float32(-1), a[idx])
    first, second = np.from_dlpack(r), np.from_dlpack(r)
    assert np.shares_memory(first, second) and _same(first, want)
    host = np.asarray(r)
    assert not np.shares_memory(host, first) and _same(host, want) and _same(r.to_host(), want)
    first[3, 5] = 1234.5  # written through one view, read through the other
    assert second[3, 5] == np.float32(1234.5)


def test_device_result_of_a_resident_array_and_back_in(vulkan, mapped, data):
    a, idx, _ = data
    r = lf.from_array(a, chunks=(24, 40)).persist(device=True).compute(device=True)
    assert _same(np.from_dlpack(r), a)
    x = lf.from_array(r, chunks=(48, 40))  # a DLPack producer on the CPU: read in place
    assert _same(x.index_select(0, idx).compute(), a[idx])


def test_from_array_refuses_a_gpu_dlpack_producer_naming_it():
    class OpenCLTensor:
        def __dlpack__(self, **kwargs):
            raise AssertionError("not read")

        def __dlpack_device__(self):
            return (4, 1)

    with pytest.raises(NotImplementedError, match="DLPack tensor on OpenCL 1"):
        lf.from_array(OpenCLTensor())


def test_from_array_of_a_cuda_tensor_where_vulkan_does_not_share_the_gpu_says_why(vulkan, mapped):
    """A CUDA producer is read device to device only where the pool's GPU is that CUDA device;
    on lavapipe (host-visible memory) the refusal names why and the fix."""
    host = np.arange(12, dtype=np.float32)

    class CudaTensor:  # a producer claiming CUDA device 0 (its capsule is never dereferenced)
        def __dlpack__(self, stream=None, **kwargs):
            assert stream == 1  # ordered before copies on the legacy default stream
            return dlpack.capsule(host.ctypes.data, host.shape, host.dtype, (dlpack.CUDA, 0), self)

        def __dlpack_device__(self):
            return (dlpack.CUDA, 0)

    with pytest.raises(NotImplementedError, match=r"host-visible.*copy it to the host first"):
        lf.from_array(CudaTensor())
    gc.collect()
    assert dlpack.live() == 0  # the producer's capsule was let go


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.integers(1, 40), cols=st.integers(1, 24), row_chunk=st.integers(1, 40),
       col_chunk=st.integers(1, 24), op=st.sampled_from(["index_select", "gather", "masked_fill"]),
       spill=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_resident_and_spilled_blocks_give_numpy_bits(vulkan, rows, cols, row_chunk, col_chunk, op,
                                                      spill, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(-2**31, 2**31 - 1, (rows, cols), dtype=np.int32)
    chunks = (min(row_chunk, rows), min(col_chunk, cols))
    budget = max(chunks[0] * chunks[1] * 4, 1) + 16 if spill else 0.8
    xp = lf.from_array(a, chunks=chunks).persist(device=True, device_memory_budget=budget)
    if op == "index_select":
        idx = rng.integers(0, cols, rng.integers(1, 30))
        want, y = a[:, idx], xp.index_select(1, idx)
    elif op == "gather":
        idx = rng.integers(0, rows, (rng.integers(1, 30), cols))
        want, y = np.take_along_axis(a, idx, 0), xp.gather(0, idx)
    else:
        mask = rng.random((rows, cols)) < 0.5
        want, y = np.where(mask, np.int32(-7), a), xp.masked_fill(mask, -7)
    if spill:  # a result block can be larger than x's (more indices than columns): room for it too
        budget = max(budget, max(math.prod(block) for block in itertools.product(*y.chunks)) * 4 + 16)
    assert _same(y.compute(device_memory_budget=budget), want)
    if not spill:
        assert _same(_read(y.compute(device=True)), want)


def test_blocks_stay_on_the_device_of_their_block_number(vulkan, pool, monkeypatch, data):
    from lazyfuel.backends.vulkan import get_pool

    a, idx, mask = data
    monkeypatch.setenv("LAZYFUEL_DEVICES", f"{pool.info.index},{pool.info.index}")  # two pools
    second = get_pool(pool.info.index, replica=1)
    second.allocator.poison = pool.allocator.poison
    xp = lf.from_array(a, chunks=(24, 40)).persist(device=True)
    assert [b.pool for b in _blocks(xp)] == [pool, second, pool, second]  # task.device_for
    with lf.profile() as p:
        got = xp.index_select(0, idx).masked_fill(mask, -1).compute()
    assert _same(got, np.where(mask, np.float32(-1), a[idx]))
    assert p.bytes_uploaded <= idx.size * 4 + mask.size  # each block read on its own pool
    assert p.devices[pool.label] == p.devices[second.label] == 2
    r = xp.compute(device=True)  # assembled on the first block's pool, the rest copied over
    assert r.device == pool.label and _same(_read(r), a)


def test_empty_and_zero_d_results_on_the_device(vulkan, mapped):
    r = lf.from_array(np.zeros((0, 5), np.float32)).compute(device=True)
    assert r.shape == (0, 5) and np.from_dlpack(r).shape == (0, 5)
    s = lf.from_array(np.float64(2.5)).compute(device=True)
    assert s.shape == () and np.from_dlpack(s)[()] == 2.5


def test_device_local_memory_as_a_discrete_gpu_has_it(vulkan, pool, data):
    """In staged mode device memory is not mapped (a discrete GPU's DEVICE_LOCAL): blocks move
    through staging, spill and come back, and a DeviceArray is no CPU DLPack, only a host copy."""
    a, idx, mask = data
    want = np.where(mask, np.float32(-1), a[idx])
    with in_mode(pool, Mode.STAGED) as allocator:
        assert not allocator.direct
        budget = 2 * 24 * 40 * 4 + 100
        xp = lf.from_array(a, chunks=(24, 40)).persist(device=True, device_memory_budget=budget)
        assert sum(b.spilled for b in _blocks(xp)) == 2
        with lf.profile() as p:
            y = xp.index_select(0, idx).masked_fill(mask, -1)
            assert _same(y.compute(device_memory_budget=budget), want)
        block = 24 * 40 * 4  # spilled blocks come back (and others go out), counted
        assert p.bytes_uploaded >= 2 * block and p.bytes_downloaded >= want.nbytes + 2 * block
        r = y.compute(device=True)
        if hand_off(pool).kind == "cuda":  # an NVIDIA GPU: CUDA reads the exported memory in place
            assert r.__dlpack_device__() == (2, hand_off(pool).cuda_device)  # kDLCUDA
            assert r.hand_off.kind == "cuda" and hasattr(r, "__cuda_array_interface__")
        else:
            assert r.__dlpack_device__() == (7, pool.info.index)  # kDLVulkan: no CPU consumer reads it
            with pytest.raises(BufferError, match="device-local memory"):
                np.from_dlpack(r)
            assert r.hand_off.kind == "none" and not hasattr(r, "__cuda_array_interface__")
        assert _same(np.asarray(r), want)
        in_use = allocator.in_use
        del xp, y, r
        gc.collect()
        assert allocator.in_use < in_use  # freed into the allocator they came from
