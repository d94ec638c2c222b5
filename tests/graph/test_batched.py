"""Several resident blocks per task and per command buffer (`graph.batched`, issue 18 W3), on the
real pool (lavapipe in CI) with the validation layer on.

Every result is compared bitwise with numpy on fresh random data, outputs poisoned (the `pool`
fixture); `lf.profile` counts programs and submits. The `pool` fixture puts a task's k blocks into
one submit, so submits count tasks; `each_submit` keeps the default, a submit per block as soon as
it is recorded (`executor.PROGRAMS_PER_SUBMIT`)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazyfuel as lf
from lazyfuel.backends.vulkan.residency import ResidentBlock
from lazyfuel.graph.batched import blocks_per_task, task_numbers
from tests.backends.vulkan.test_vulkan_residency_persist_device import _blocks, _read, _same, _within_chunks


def _case(rows: int, chunk: int, cols: int = 24):
    rng = np.random.default_rng()
    a = rng.standard_normal((rows, cols)).astype(np.float32)
    idx = _within_chunks(rng, rows, chunk)
    mask = rng.random((rows, 1)) < 0.4
    return a, idx, mask, np.where(mask, np.float32(-1), a[idx])


def test_blocks_per_task_keeps_a_task_per_thread_and_bounds_the_bytes():
    gib = 1 << 30
    assert blocks_per_task(16, gib, 4, 4 * gib) == 4  # W3 on the H200: 4 tasks of 4
    assert blocks_per_task(16, gib, 4, 2 * gib) == 2  # the byte bound wins
    assert blocks_per_task(16, gib, 4, gib // 2) == 1  # a block over the bound runs alone
    assert blocks_per_task(64, 1 << 20, 2, 4 * gib) == 32
    assert blocks_per_task(3, 1 << 20, 8, 4 * gib) == 1  # more threads than blocks
    assert blocks_per_task(16, gib, 4, 0) == 1  # off


def test_task_numbers_never_mix_devices():
    assert task_numbers(8, 1, 3) == [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert task_numbers(8, 2, 2) == [[0, 2], [4, 6], [1, 3], [5, 7]]  # task.device_for: i % 2
    for numbers in task_numbers(11, 3, 2):
        assert len({n % 3 for n in numbers}) == 1


@pytest.mark.parametrize("mask_kind", ["numpy", "resident"])
@pytest.mark.parametrize("idx_kind", ["numpy", "resident"])
def test_blocks_share_a_submit_and_give_numpy_bits(vulkan, pool, mask_kind, idx_kind):
    a, idx, mask, want = _case(8 * 16 - 5, 16)  # 8 blocks, the last one uneven
    x = lf.from_array(a, chunks=(16, 24)).persist(device=True)
    i = idx if idx_kind == "numpy" else lf.from_array(idx, chunks=16).persist(device=True)
    m = mask if mask_kind == "numpy" else lf.from_array(mask, chunks=(16, 1)).persist(device=True)
    y = x.index_select(0, i).masked_fill(m, -1.0)
    with lf.profile() as p:
        r = y.compute(device=True, num_workers=2)
    assert _same(_read(r), want)
    assert p.programs == 8 and p.submits == 2  # 2 tasks of 4 blocks: one submit each
    with lf.profile() as p:
        yp = y.persist(device=True, num_workers=2)
    assert p.programs == 8 and p.submits == 2 and p.bytes_downloaded == 0
    blocks = _blocks(yp)
    assert len(blocks) == 8 and all(isinstance(b, ResidentBlock) and b.pool is pool for b in blocks)
    assert [b.shape for b in blocks] == [(16, 24)] * 7 + [(11, 24)]
    assert yp.chunks == y.chunks and y.to_dask().chunks == y.chunks
    assert _same(yp.compute(), want)
    assert _same(yp.masked_fill(mask, 2.0).compute(), np.where(mask, np.float32(2), want))


def test_one_task_per_block_when_off(vulkan, pool):
    a, idx, mask, want = _case(64, 16)
    x = lf.from_array(a, chunks=(16, 24)).persist(device=True)
    with lf.profile() as p:
        r = x.index_select(0, idx).masked_fill(mask, -1.0).compute(device=True, device_task_bytes=0)
    assert _same(_read(r), want) and p.programs == p.submits == 4


def test_the_byte_bound_cuts_tasks(vulkan, pool):
    a, idx, mask, want = _case(128, 16)
    x = lf.from_array(a, chunks=(16, 24)).persist(device=True)
    with lf.profile() as p:  # 2 blocks of 1536 bytes per task at most
        r = x.index_select(0, idx).masked_fill(mask, -1.0).compute(
            device=True, num_workers=1, device_task_bytes=2 * 16 * 24 * 4)
    assert _same(_read(r), want) and p.programs == 8 and p.submits == 4


def test_batched_blocks_spill_under_a_small_budget_bit_exact(vulkan, pool):
    a, idx, mask, want = _case(8 * 16, 16)
    budget = 3 * 16 * 24 * 4 + 100
    x = lf.from_array(a, chunks=(16, 24)).persist(device=True, device_memory_budget=budget)
    y = x.index_select(0, idx).masked_fill(mask, -1.0)
    with lf.profile() as p:
        yp = y.persist(device=True, device_memory_budget=budget, num_workers=2)
    assert p.submits < p.programs
    blocks = _blocks(yp) + _blocks(x)
    assert sum(not b.spilled for b in blocks) <= 3  # back under the budget once the batches closed
    assert _same(yp.compute(device_memory_budget=budget), want)
    assert _same(x.compute(device_memory_budget=budget), a)


def test_blocks_of_two_pools_never_share_a_program(vulkan, pool, monkeypatch):
    from lazyfuel.backends.vulkan import get_pool

    a, idx, mask, want = _case(8 * 16, 16)
    monkeypatch.setenv("LAZYFUEL_DEVICES", f"{pool.info.index},{pool.info.index}")  # two pools
    second = get_pool(pool.info.index, replica=1)
    second.allocator.poison = pool.allocator.poison
    x = lf.from_array(a, chunks=(16, 24)).persist(device=True)
    assert [b.pool for b in _blocks(x)] == [pool, second] * 4
    with lf.profile() as p:
        yp = x.index_select(0, idx).masked_fill(mask, -1.0).persist(device=True, num_workers=2)
    assert [b.pool for b in _blocks(yp)] == [pool, second] * 4  # each where its input lies
    assert p.programs == 8 and p.submits == 4  # per pool 2 tasks of 2
    assert p.devices[pool.label] == p.devices[second.label] == 4
    assert p.bytes_peer == 0
    assert _same(yp.compute(), want)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n_blocks=st.integers(1, 12), chunk=st.integers(1, 9), threads=st.integers(1, 6),
       cols=st.integers(1, 9), uneven=st.booleans())
def test_any_block_count_and_threads_give_numpy_bits(vulkan, pool, n_blocks, chunk, threads, cols, uneven):
    rows = max(n_blocks * chunk - (chunk // 2 if uneven else 0), 1)
    a, idx, mask, want = _case(rows, chunk, cols)
    x = lf.from_array(a, chunks=(chunk, cols)).persist(device=True)
    y = x.index_select(0, idx).masked_fill(mask, -1.0)
    blocks = len(x.chunks[0])
    with lf.profile() as p:
        r = y.compute(device=True, num_workers=threads)
    assert _same(_read(r), want)
    tasks = task_numbers(blocks, 1, blocks_per_task(blocks, chunk * cols * 4, threads, 4 << 30))
    assert p.programs == blocks and p.submits == len(tasks)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_a_compute_to_the_host_over_resident_blocks_shares_submits(vulkan, pool, threads):
    a, idx, mask, want = _case(8 * 16 - 3, 16)
    x = lf.from_array(a, chunks=(16, 24)).persist(device=True)
    y = x.index_select(0, idx).masked_fill(mask, -1.0)
    out = np.full(want.shape, np.nan, np.float32)
    with lf.profile() as p:
        got = y.compute(out=out, num_workers=threads)
    assert got is out and _same(out, want)
    assert p.programs == 8 and p.submits == threads and p.bytes_downloaded == want.nbytes
    with lf.profile() as p:
        assert _same(y.compute(scheduler="sync"), want)
    assert p.programs == 8 and p.submits == 1


def test_a_compute_to_the_host_over_resident_blocks_hit_across_chunks(vulkan, pool):
    rng = np.random.default_rng()
    a = rng.standard_normal((8 * 16 - 3, 24)).astype(np.float32)
    idx = rng.permutation(a.shape[0])  # each block reads pieces of every chunk
    mask = rng.random((a.shape[0], 1)) < 0.4
    x = lf.from_array(a, chunks=(16, 24)).persist(device=True)
    y = x.index_select(0, idx).masked_fill(mask, -1.0)
    assert _same(y.compute(num_workers=2), np.where(mask, np.float32(-1), a[idx]))
    assert _same(_read(y.compute(device=True, num_workers=2)), np.where(mask, np.float32(-1), a[idx]))


@pytest.mark.parametrize("per_submit", [1, 2, 1 << 20])
@pytest.mark.parametrize("device", [True, False])
def test_a_bad_resident_index_in_a_batch_names_value_and_position(vulkan, each_submit, monkeypatch, device,
                                                                  per_submit):
    from lazyfuel.backends.vulkan import executor

    # with a submit per block or pair, the submits after the bad one are waited on before closing
    monkeypatch.setattr(executor, "PROGRAMS_PER_SUBMIT", per_submit, raising=False)
    a = np.random.default_rng().standard_normal((64, 8)).astype(np.float32)
    x = lf.from_array(a, chunks=(16, 8)).persist(device=True)
    idx = np.arange(64)
    idx[37] = 99
    y = x.index_select(0, lf.from_array(idx, chunks=16).persist(device=True))
    with pytest.raises(IndexError, match=r"index 99 at position 37 is out of range; expected 0 <= index < 6"):
        y.compute(device=True, num_workers=1) if device else y.compute(num_workers=1)


def test_explain_says_resident_blocks_are_batched_not_grouped(vulkan, pool):
    a = np.random.default_rng().standard_normal((128, 8)).astype(np.float32)
    x = lf.from_array(a, chunks=(16, 8))
    mask = a[:, :1] > 0
    with lf.config(task_bytes=1024):
        assert "runs this node's 8 blocks as 4 task(s)" in lf.explain(x.masked_fill(mask, 1.0))
        text = lf.explain(x.persist(device=True).masked_fill(mask, 1.0))
        assert "as 4 task(s)" not in text
        assert "several blocks of one device per task and command buffer" in text
        with lf.config(device_task_bytes=0):  # one task per block: resident blocks never merge
            text = lf.explain(x.persist(device=True).masked_fill(mask, 1.0))
            assert "adjacent blocks" not in text and "per task and command buffer" not in text


def _events(monkeypatch) -> list[str]:
    """'record' per program recorded and 'submit' per submit, in order (the real methods run)."""
    from lazyfuel.backends.vulkan.executor import VulkanExecutor
    from lazyfuel.backends.vulkan.pool import DevicePool

    events: list[str] = []
    record, submit = VulkanExecutor._record, DevicePool.submit

    def recording(self, *args, **kwargs):
        events.append("record")
        return record(self, *args, **kwargs)

    def submitting(self, context):
        events.append("submit")
        return submit(self, context)

    monkeypatch.setattr(VulkanExecutor, "_record", recording)
    monkeypatch.setattr(DevicePool, "submit", submitting)
    return events


@pytest.mark.parametrize("to_device", [True, False])
def test_each_block_is_submitted_as_soon_as_it_is_recorded(vulkan, each_submit, monkeypatch, to_device):
    a, idx, mask, want = _case(8 * 16 - 5, 16)
    x = lf.from_array(a, chunks=(16, 24)).persist(device=True)
    y = x.index_select(0, idx).masked_fill(mask, -1.0)
    y.persist(device=True, num_workers=1)  # the indices kept on the device at their first use
    events = _events(monkeypatch)
    with lf.profile() as p:
        held = y.persist(device=True, num_workers=1) if to_device else y.compute(num_workers=1)
    assert p.programs == 8 and p.submits == 8 and p.bytes_downloaded == (0 if to_device else want.nbytes)
    assert events == ["record", "submit"] * 8, events  # one task: the device has block j while j + 1 records
    again = y.persist(device=True, num_workers=2)
    assert _same(held.compute() if to_device else held, want)  # held across persists
    assert _same(again.compute(), want) and _same(_read(again.compute(device=True)), want)


def test_blocks_in_pairs_share_a_submit(vulkan, each_submit, monkeypatch):
    from lazyfuel.backends.vulkan import executor

    monkeypatch.setattr(executor, "PROGRAMS_PER_SUBMIT", 2, raising=False)
    a, idx, mask, want = _case(8 * 16, 16)
    y = lf.from_array(a, chunks=(16, 24)).persist(device=True).index_select(0, idx).masked_fill(mask, -1.0)
    y.persist(device=True, num_workers=1)  # the indices kept on the device at their first use
    events = _events(monkeypatch)
    with lf.profile() as p:
        r = y.persist(device=True, num_workers=1)
    assert p.programs == 8 and p.submits == 4
    assert events == ["record", "record", "submit"] * 4
    assert _same(r.compute(), want)
