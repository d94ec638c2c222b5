"""Resident blocks and device results over several pools (issue 20), on two pools of one device.

`LAZYFUEL_DEVICES=i,i` opens two pools (two VkDevices) on the one Vulkan device here, which is
how the several-GPU paths run on lavapipe. What is checked, each result bitwise against numpy on
fresh random data:
- a chain over resident blocks runs on the pool that holds them (`graph.task.home_device`), so
  persisting it keeps every result block in its input's pool and moves no byte through the host;
- a chain mixing blocks of both pools moves the other pool's bytes device to device (exported
  memory imported by the other VkDevice: `backends/vulkan/peer.py`), counted as `bytes_peer` in
  `lf.profile`, with no host bytes but the concrete indices; where no such path exists (the two
  pools map memory differently) the bytes go through the host and `lf.explain` says why;
- `compute(device=N)` gathers the result onto pool N (`compute(device=True)`: the pool holding
  most of it), read in place by `np.from_dlpack` there;
- each pool spills under its own `device_memory_budget`.
What stays unverified: two separate GPUs, where exported opaque-fd memory does not import (the
blocks then cross through host memory, as the no-path test shows).
"""

from __future__ import annotations

import gc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazyfuel as lf
from lazyfuel.backends.vulkan.memtypes import Mode
from lazyfuel.backends.vulkan.residency import ResidentBlock, store_of
from lazyfuel.backends.vulkan.transfer import in_mode

FILL = np.float32(-1.5)


@pytest.fixture
def pools(vulkan, pool, monkeypatch):
    """The two pools of `LAZYFUEL_DEVICES=i,i` on the Vulkan device here, both poisoned."""
    from lazyfuel.backends.vulkan import get_pool

    index = pool.info.index
    monkeypatch.setenv("LAZYFUEL_DEVICES", f"{index},{index}")
    second = get_pool(index, replica=1)
    second.allocator.poison = pool.allocator.poison
    return pool, second


def _blocks(arr: lf.Array) -> list:
    """The chunks a persisted Array's graph holds, row-major."""
    from dask.core import flatten

    dsk = arr.to_dask()
    graph = dsk.__dask_graph__()
    return [graph[k] for k in flatten(dsk.__dask_keys__())]


def _pools_of(arr: lf.Array) -> list:
    return [b.pool for b in _blocks(arr)]


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    return got.shape == want.shape and got.dtype == want.dtype and got.tobytes() == want.tobytes()


def _within_chunks(rng: np.random.Generator, n: int, chunk: int) -> np.ndarray:
    """A permutation of 0..n-1 that keeps each index inside its chunk of `chunk` rows."""
    return np.concatenate([lo + rng.permutation(min(chunk, n - lo)) for lo in range(0, n, chunk)])


def _one_pool(pool, arr: lf.Array, **knobs) -> lf.Array:
    """`arr` persisted with every block on `pool` alone (blocks spread over that device only)."""
    return arr.persist(device=True, devices=str(pool.info.index), **knobs)


@pytest.fixture
def data():
    rng = np.random.default_rng()
    a = rng.standard_normal((96, 40)).astype(np.float32)
    mask = rng.random((96, 40)) < 0.4
    return a, mask, _within_chunks(rng, 96, 24)


def test_a_chain_over_one_pools_blocks_runs_there_and_keeps_its_results_there(pools, data):
    first, _ = pools
    a, mask, _ = data
    xp = _one_pool(first, lf.from_array(a, chunks=(24, 40)))
    mp = _one_pool(first, lf.from_array(mask, chunks=(24, 40)))
    assert _pools_of(xp) == _pools_of(mp) == [first] * 4
    with lf.profile() as p:  # spread over both pools now: round-robin would put blocks 1, 3 on the second
        yp = lf.masked_fill(xp, mp, FILL).persist(device=True)
    assert _pools_of(yp) == [first] * 4  # each result in its inputs' pool
    assert p.bytes_uploaded == p.bytes_downloaded == p.bytes_peer == 0  # nothing moved at all
    assert p.devices == {first.label: 4}
    assert _same(yp.compute(), np.where(mask, FILL, a))


def test_a_chain_mixing_blocks_of_both_pools_moves_them_device_to_device(pools, data):
    first, second = pools
    a, mask, idx = data
    xp = _one_pool(first, lf.from_array(a, chunks=(24, 40)))  # every block on the first pool
    mp = lf.from_array(mask, chunks=(24, 40)).persist(device=True)  # round-robin over both
    assert _pools_of(mp) == [first, second, first, second]
    y = xp.index_select(0, idx).masked_fill(mp, FILL)
    want = np.where(mask, FILL, a[idx])
    with lf.profile() as p:
        yp = y.persist(device=True)
    assert _pools_of(yp) == [first] * 4  # where most of each task's input bytes lie
    assert p.bytes_uploaded == idx.size * 4 and p.bytes_downloaded == 0  # the U32 indices alone
    assert p.bytes_peer == 2 * 24 * 40  # the second pool's two mask blocks
    assert _same(yp.compute(), want)
    with lf.profile() as p:
        assert _same(y.compute(), want)
    assert p.bytes_downloaded == want.nbytes and p.bytes_peer == 2 * 24 * 40
    text = lf.explain(y)
    assert "4 block(s) resident in device memory (2 on Vulkan device #0" in text
    assert f"2 on Vulkan device #1 {second.label})" in text
    assert f"blocks of Vulkan device #0 {first.label} and Vulkan device #1 {second.label} meet device " \
           "to device (exported memory)" in text


@pytest.mark.parametrize("op", ["index_select", "gather"])
def test_a_select_reading_blocks_of_both_pools_joins_its_pieces_on_the_device(pools, data, op):
    first, second = pools
    a, _, _ = data
    rng = np.random.default_rng()
    xp = lf.from_array(a, chunks=(24, 40)).persist(device=True)  # blocks 0, 2 first; 1, 3 second
    if op == "index_select":
        idx = rng.integers(0, 96, 50)  # every output block reads rows of several blocks
        y, want = xp.index_select(0, idx), a[idx]
    else:
        idx = rng.integers(0, 96, (30, 40))
        y, want = xp.gather(0, idx), np.take_along_axis(a, idx, 0)
    with lf.profile() as p:
        yp = y.persist(device=True)
    # read tasks select on their block's pool and leave the pieces there; each output block joins
    # its pieces on one pool, the other pool's moved device to device; only positions go up
    assert p.bytes_downloaded == 0 and p.bytes_peer > 0
    assert p.bytes_uploaded <= 2 * idx.size * 4
    assert set(p.devices) == {first.label, second.label}
    assert _same(yp.compute(), want)
    assert _same(y.compute(), want)


def test_device_local_pools_as_a_discrete_gpu_has_them_move_blocks_device_to_device(pools, data):
    """Both pools in staged mode (device memory not mapped, as on a discrete GPU): the exported
    copy and its import are unmapped device memory too, and the chain still moves no host bytes
    but its indices (staged mode counts every host byte it moves)."""
    first, second = pools
    a, mask, idx = data
    want = np.where(mask, FILL, a[idx])
    with in_mode(first, Mode.STAGED), in_mode(second, Mode.STAGED):
        xp = _one_pool(first, lf.from_array(a, chunks=(24, 40)))
        mp = lf.from_array(mask, chunks=(24, 40)).persist(device=True)
        with lf.profile() as p:
            yp = xp.index_select(0, idx).masked_fill(mp, FILL).persist(device=True)
        assert p.bytes_uploaded == idx.size * 4 and p.bytes_downloaded == 0
        assert p.bytes_peer == 2 * 24 * 40
        assert _same(yp.compute(), want)
        with lf.profile() as p:
            r = yp.compute(device=1)  # gathered onto the second pool, device to device
        assert r.pool is second and p.bytes_peer == a.nbytes and p.bytes_downloaded == 0
        assert _same(np.asarray(r), want)
        del xp, mp, yp, r
        gc.collect()


def test_without_a_device_path_blocks_cross_through_host_memory_and_explain_says_why(pools, data):
    first, second = pools
    a, mask, idx = data
    want = np.where(mask, FILL, a[idx])
    with in_mode(second, Mode.STAGED):  # the second pool's memory unmapped: no shared memory type
        xp = _one_pool(first, lf.from_array(a, chunks=(24, 40)))
        mp = lf.from_array(mask, chunks=(24, 40)).persist(device=True)
        y = xp.index_select(0, idx).masked_fill(mp, FILL)
        with lf.profile() as p:
            assert _same(y.compute(), want)
        assert p.bytes_peer == 0
        assert p.bytes_uploaded == idx.size * 4 + 2 * 24 * 40  # the mask blocks came up again
        text = lf.explain(y)
        assert "meet through host memory (" in text and "map device memory differently" in text
        del xp, mp, y
        gc.collect()


def test_compute_on_a_named_device_gathers_there_read_in_place(pools, data):
    first, second = pools
    a, mask, idx = data
    xp = lf.from_array(a, chunks=(24, 40)).persist(device=True)  # blocks on both pools
    y = xp.index_select(0, idx).masked_fill(mask, FILL)
    want = np.where(mask, FILL, a[idx])
    for device, pool in ((1, second), (0, first)):
        yp = y.persist(device=True)
        with lf.profile() as p:
            r = yp.compute(device=device)
        assert isinstance(r, lf.DeviceArray) and r.device == pool.label and r.pool is pool
        assert p.bytes_uploaded == p.bytes_downloaded == 0  # the other pool's half device to device
        assert p.bytes_peer == a.nbytes // 2
        with lf.profile() as p:
            view, again = np.from_dlpack(r), np.from_dlpack(r)
        assert p.bytes_downloaded == 0 and np.shares_memory(view, again) and _same(view, want)
        assert r.__dlpack_device__() == (1, 0)  # lavapipe: host-visible, a CPU DLPack
        view[1, 2] = 7.0  # written through one view, read through the other
        assert again[1, 2] == np.float32(7.0)
    r = y.compute(device=1)  # straight from the graph, not persisted first
    assert r.device == second.label and _same(np.asarray(r), want)


def test_compute_on_the_device_by_default_goes_where_most_of_the_result_is(pools):
    first, second = pools
    a = np.random.default_rng().standard_normal((96, 8)).astype(np.float32)
    xp = lf.from_array(a, chunks=((8, 40, 8, 40), (8,))).persist(device=True)
    assert _pools_of(xp) == [first, second, first, second]  # 80 rows on the second, 16 on the first
    r = xp.compute(device=True)
    assert r.device == second.label and _same(np.from_dlpack(r), a)
    even = lf.from_array(a, chunks=(24, 8)).persist(device=True)
    assert even.compute(device=True).device == first.label  # a tie: device 0, as torch's default


def test_a_device_number_that_names_no_pool_is_refused(pools, data):
    a, _, _ = data
    xp = lf.from_array(a, chunks=(24, 40)).persist(device=True)
    with pytest.raises(IndexError, match=r"compute\(device=2\): the result can go to device 0\.\.1 "):
        xp.compute(device=2)
    for bad in ("1", -1, 1.0):
        with pytest.raises(TypeError, match=r"device takes False .* or a device number >= 0"):
            xp.compute(device=bad)
    with pytest.raises(TypeError, match=r"persist\(device=1\): device takes True .* compute\(device=N\)"):
        xp.persist(device=1)  # device=0 would have been a host persist, 1 a resident one: refused


def test_each_pool_spills_under_its_own_budget_bit_exact(pools, data):
    first, second = pools
    a, mask, _ = data
    gc.collect()  # no pinned result of an earlier test left in the pools' budgets
    block = 12 * 40 * 4
    budget = 2 * block + 100  # two blocks of x per pool
    xp = lf.from_array(a, chunks=(12, 40)).persist(device=True, device_memory_budget=budget)
    blocks = _blocks(xp)
    assert [b.pool for b in blocks] == [first, second] * 4
    for pool in pools:
        mine = [b for b in blocks if b.pool is pool]
        assert sum(not b.spilled for b in mine) == 2 and store_of(pool).device_bytes <= budget
    mp = _one_pool(first, lf.from_array(mask, chunks=(12, 40)))  # every mask block on one pool
    idx = _within_chunks(np.random.default_rng(), 96, 12)
    y = xp.index_select(0, idx).masked_fill(mp, FILL)
    with lf.profile() as p:
        assert _same(y.compute(device_memory_budget=budget), np.where(mask, FILL, a[idx]))
    assert p.devices == {first.label: 4, second.label: 4}  # each task where its x block lies
    assert store_of(second).device_bytes <= budget  # blocks read by the other pool stay in budget
    assert sum(b.spills for b in blocks) > 4  # spilled blocks came back and others went out
    assert _same(xp.compute(device_memory_budget=budget), a)


def test_a_spilled_block_reaches_the_other_pool_from_its_host_copy(pools, data):
    first, second = pools
    a, mask, idx = data
    gc.collect()
    xp = lf.from_array(a, chunks=(24, 40)).persist(device=True)  # x blocks on both pools
    mp = _one_pool(first, lf.from_array(mask, chunks=(24, 40)),
                   device_memory_budget=24 * 40 + 16)  # one mask block on the device at a time
    assert sum(b.spilled for b in _blocks(mp)) == 3
    want = np.where(mask, FILL, a[idx])
    with lf.profile() as p:
        assert _same(xp.index_select(0, idx).masked_fill(mp, FILL).compute(), want)
    assert p.devices == {first.label: 2, second.label: 2}
    assert p.bytes_downloaded == want.nbytes  # spilled bytes are on the host already: not downloaded


def test_a_block_of_odd_bytes_from_the_other_pool_reads_to_its_last_byte(pools):
    # 18 bytes of mask: the kernel reads them as words, the second one partly past the bytes
    a = np.random.default_rng().integers(0, 2**31, (2, 18), dtype=np.int32)
    mask = np.ones((2, 18), bool)
    xp = _one_pool(pools[0], lf.from_array(a, chunks=(1, 18)))
    mp = lf.from_array(mask, chunks=(1, 18)).persist(device=True)  # block 1 on the second pool
    with lf.profile() as p:
        got = lf.masked_fill(xp, mp, -7).compute()
    assert p.bytes_peer == 18 and _same(got, np.full((2, 18), -7, np.int32))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.integers(1, 48), cols=st.integers(1, 20), row_chunk=st.integers(1, 48),
       mask_chunk=st.integers(1, 48), x_where=st.sampled_from(["first", "spread"]),
       mask_where=st.sampled_from(["first", "spread", "host"]), within=st.booleans(),
       spill=st.booleans(), target=st.sampled_from([None, 0, 1]), seed=st.integers(0, 2**32 - 1))
def test_any_placement_gives_numpy_bits(pools, rows, cols, row_chunk, mask_chunk, x_where, mask_where,
                                        within, spill, target, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(-2**31, 2**31 - 1, (rows, cols), dtype=np.int32)
    mask = rng.random((rows, cols)) < 0.5
    chunk = min(row_chunk, rows)
    budget = max(chunk * 4, min(mask_chunk, rows)) * cols + 16 if spill else 0.8  # one block of either
    idx = _within_chunks(rng, rows, chunk) if within else rng.integers(0, rows, rows)

    def placed(value: np.ndarray, rows_per_chunk: int, where: str):
        arr = lf.from_array(value, chunks=(min(rows_per_chunk, rows), cols))
        if where == "host":
            return value
        if where == "first":
            return _one_pool(pools[0], arr)
        return arr.persist(device=True, device_memory_budget=budget)

    xp, mp = placed(a, chunk, x_where), placed(mask, mask_chunk, mask_where)
    y = xp.index_select(0, idx).masked_fill(mp, -7)
    want = np.where(mask, np.int32(-7), a[idx])
    assert _same(y.compute(device_memory_budget=budget), want)
    if not spill:
        r = y.compute(device=True if target is None else target)
        assert target is None or r.pool is pools[target]
        assert _same(np.from_dlpack(r), want)


def test_a_result_past_the_largest_allocation_is_refused_before_anything_spills(pools, data):
    first, _ = pools
    a, _, _ = data
    xp = _one_pool(first, lf.from_array(a, chunks=(24, 40)))
    largest = first.info.max_memory_allocation_size
    want = rf"block of {largest + 4} bytes is larger than the largest allocation .* \(maxMemoryAllocationSize"
    with lf.config(device_memory_budget=2**50), pytest.raises(MemoryError, match=want):  # a budget past it
        ResidentBlock.reserve(first, ((largest + 4) // 4,), np.float32)
    assert not any(b.spilled for b in _blocks(xp))  # spilling could not have helped: nothing went
