"""A repeated device persist replayed from what its first run decided (`graph.replay`, issue 18 W3
host time), on the real pool (lavapipe in CI) with the validation layer on and every allocation
poisoned (`each_submit`: an unwritten byte shows).

Every result is compared bitwise with numpy on fresh random data. Whether a persist replayed is
seen from the tasks it evaluated (`batched._results`, counted around the real function: none
when the replay ran)."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from dask.core import flatten

import lazyfuel as lf
from lazyfuel.graph import batched
from tests.backends.vulkan.test_vulkan_residency_persist_device import _blocks, _read, _same
from tests.graph.test_batched import _case

BLOCKS, ROWS, COLS = 8, 16, 24


def _counting_tasks(monkeypatch) -> list[int]:
    """One entry per batched task evaluated (the real `_results` runs)."""
    ran: list[int] = []
    real = batched._results

    def counted(*args, **kwargs):
        ran.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(batched, "_results", counted)
    return ran


def _w3(rows: int = BLOCKS * ROWS):
    """W3 at lavapipe's size: x persisted, y = masked_fill(index_select(x, 0, idx), mask (N, 1), -1)."""
    a, idx, mask, want = _case(rows, ROWS, COLS)
    x = lf.from_array(a, chunks=(ROWS, COLS)).persist(device=True)
    return a, x, x.index_select(0, idx).masked_fill(mask, -1.0), want, mask


def _poisoned_memory_freed(pool) -> None:
    """Blocks of garbage made and freed, so the next results' memory held other bytes first."""
    junk = lf.from_array(np.full((BLOCKS * ROWS, COLS), np.nan, np.float32),
                         chunks=(ROWS, COLS)).persist(device=True)
    del junk
    gc.collect()


@pytest.mark.parametrize("kw", [{"num_workers": 2}, {"scheduler": "sync"}, {}])
def test_repeated_persists_replay_bit_exact_with_results_held_and_dropped(vulkan, each_submit,
                                                                          monkeypatch, kw):
    a, x, y, want, _ = _w3()
    ran = _counting_tasks(monkeypatch)
    first = y.persist(device=True, **kw)  # evaluated: notes the replay
    evaluated = len(ran)
    assert evaluated
    held = []
    for i in range(6):
        _poisoned_memory_freed(each_submit)
        r = y.persist(device=True, **kw)
        if i % 2:
            held.append(r)  # every other result held across the later persists, the rest dropped
        assert _same(r.compute(), want)
        del r
        gc.collect()
    assert len(ran) == evaluated  # every later persist replayed: no task evaluated
    for r in [first, *held]:
        assert _same(r.compute(), want)
    for _ in range(3):  # compute(device=True): a held graph of its own (CUDA-shared results), replayed
        assert _same(_read(y.compute(device=True, **kw)), want)
    assert len(ran) == 2 * evaluated
    assert _same(x.compute(), a)


def test_the_replay_gives_the_held_runs_and_dasks_keys(vulkan, each_submit, monkeypatch):
    _, _, y, _, _ = _w3()
    y.persist(device=True)
    ran = _counting_tasks(monkeypatch)
    replayed = y.persist(device=True).to_dask()
    assert ran == []
    monkeypatch.setenv("LAZYFUEL_REPLAY_DEVICE_GRAPHS", "0")  # the same overrides: the same graph
    lf.config.reload()
    try:
        held = y.persist(device=True).to_dask()
    finally:
        monkeypatch.delenv("LAZYFUEL_REPLAY_DEVICE_GRAPHS")
        lf.config.reload()
    assert len(ran) > 0
    by_dask = y.persist(device=True, reuse_device_graphs=0).to_dask()  # its own settings: its name
    keys = list(flatten(replayed.__dask_keys__()))
    assert keys == list(flatten(held.__dask_keys__())) and sorted(replayed.__dask_graph__()) == sorted(keys)
    assert replayed.name == held.name and replayed.chunks == held.chunks == by_dask.chunks
    assert replayed.dtype == held.dtype == by_dask.dtype
    assert type(replayed._meta) is type(held._meta) and replayed._meta.shape == held._meta.shape
    assert [k[1:] for k in keys] == [k[1:] for k in flatten(by_dask.__dask_keys__())]


def test_the_replay_uploads_only_host_inputs(vulkan, each_submit):
    """A host mask is uploaded on every replay (its bytes, no more); a resident mask and the kept
    indices nothing: the x blocks are bound where they lie."""
    a, x, y, want, mask = _w3()
    y.persist(device=True)
    with lf.profile() as p:
        r = y.persist(device=True)
    assert _same(r.compute(), want)
    assert p.programs == BLOCKS and p.bytes_downloaded == 0
    assert mask.nbytes <= p.bytes_uploaded < mask.nbytes + 16 * BLOCKS  # each block's mask, padded
    kept_mask = lf.from_array(mask, chunks=(ROWS, 1)).persist(device=True)
    z = x.index_select(0, np.arange(BLOCKS * ROWS)[::-1].copy()).masked_fill(kept_mask, -1.0)
    z.persist(device=True)
    with lf.profile() as p:
        r = z.persist(device=True)
    assert p.programs == BLOCKS and p.bytes_uploaded == 0 and p.bytes_downloaded == 0
    assert _same(r.compute(), np.where(mask, np.float32(-1), a[::-1]))


def test_a_replay_after_blocks_spilled_reads_them_back_bit_exact(vulkan, each_submit, monkeypatch):
    a, idx, mask, want = _case(BLOCKS * ROWS, ROWS, COLS)
    budget = 3 * ROWS * COLS * 4 + 100  # room for 3 blocks: every persist spills others
    with lf.config(device_memory_budget=budget):
        x = lf.from_array(a, chunks=(ROWS, COLS)).persist(device=True)
        y = x.index_select(0, idx).masked_fill(mask, -1.0)
        r1 = y.persist(device=True, num_workers=2)
        ran = _counting_tasks(monkeypatch)
        assert any(b.spilled for b in _blocks(x))
        with lf.profile() as p:
            r2 = y.persist(device=True, num_workers=2)  # replayed over spilled inputs: brought back
        assert ran == [] and p.bytes_uploaded >= ROWS * COLS * 4
        assert _same(r1.compute(), want) and _same(r2.compute(), want) and _same(x.compute(), a)


def test_a_freed_input_block_ends_the_replay(vulkan, each_submit, monkeypatch):
    _, x, y, _, _ = _w3()
    y.persist(device=True)
    _blocks(x)[3].free()
    ran = _counting_tasks(monkeypatch)
    with pytest.raises(RuntimeError, match="freed"):  # as the held run says it: not a replay of freed memory
        y.persist(device=True)
    assert ran


def test_a_dropped_kept_index_block_ends_the_replay(vulkan, each_submit, monkeypatch):
    from lazyfuel.graph import kept_indices

    _, _, y, want, _ = _w3()
    y.persist(device=True)
    kept_indices.KEPT.clear()
    gc.collect()
    ran = _counting_tasks(monkeypatch)
    r = y.persist(device=True)  # evaluated again (the indices kept anew), then replayed
    assert ran and _same(r.compute(), want)
    evaluated = len(ran)
    assert _same(y.persist(device=True).compute(), want) and len(ran) == evaluated


def test_changed_knobs_end_the_replay(vulkan, each_submit, monkeypatch):
    """An environment knob changed between persists (the same config overrides, so the same held
    graph): evaluated under the new value, not replayed from the old one."""
    _, _, y, want, mask = _w3()
    y.persist(device=True)
    ran = _counting_tasks(monkeypatch)
    monkeypatch.setenv("LAZYFUEL_KEPT_INDICES", "0")  # indices uploaded with each program now
    lf.config.reload()
    try:
        with lf.profile() as p:
            r = y.persist(device=True)
        assert ran and _same(r.compute(), want)
        assert p.bytes_uploaded >= mask.nbytes + 4 * BLOCKS * ROWS  # the u32 indices went up too
        evaluated = len(ran)
        with lf.profile() as p:
            r = y.persist(device=True)  # indices made afresh by each task: not replayable
        assert len(ran) > evaluated and _same(r.compute(), want)
    finally:
        monkeypatch.delenv("LAZYFUEL_KEPT_INDICES")
        lf.config.reload()


def test_unchanged_knobs_are_told_without_reading_every_knob(vulkan, each_submit, monkeypatch):
    """The replay tells the knobs unchanged from the config's overrides and the environment object
    they fall back to, once seen equal, without building every knob's value each persist (~0.1 ms
    before the first submit on the H200: issue 18 W3); after `config.reload()` (a new environment
    object) the values are compared again, once (a changed one ends the replay:
    `test_changed_knobs_end_the_replay`); the results are numpy's bits throughout."""
    from lazyfuel.settings import Config

    _, _, y, want, _ = _w3()
    y.persist(device=True)
    y.persist(device=True)  # replayed: the knobs seen equal once
    built: list[int] = []
    real = Config.values
    monkeypatch.setattr(Config, "values", staticmethod(lambda: built.append(1) or real()))
    ran = _counting_tasks(monkeypatch)
    held = [y.persist(device=True) for _ in range(3)]
    assert not ran and built == [] and all(_same(r.compute(), want) for r in held)
    lf.config.reload()  # the same variables, read again: another environment object
    held = [y.persist(device=True) for _ in range(3)]
    assert not ran and built == [1] and all(_same(r.compute(), want) for r in held)


def test_the_knob_turns_the_replay_off(vulkan, each_submit, monkeypatch):
    _, _, y, want, _ = _w3()
    y.persist(device=True)
    ran = _counting_tasks(monkeypatch)
    with lf.config(replay_device_graphs=False):
        r = y.persist(device=True)
    assert ran and _same(r.compute(), want)


@pytest.mark.parametrize("kw", [{"num_workers": 2}, {"scheduler": "sync"}])
def test_persisted_indices_are_checked_on_every_persist(vulkan, each_submit, monkeypatch, kw):
    """Indices persisted on the device are read back, checked and narrowed by each task (an input
    made afresh): not replayed, so a bad one is named by every persist."""
    a = np.random.default_rng().standard_normal((4 * ROWS, COLS)).astype(np.float32)
    x = lf.from_array(a, chunks=(ROWS, COLS)).persist(device=True)
    order = np.random.default_rng().permutation(4 * ROWS)
    good = x.index_select(0, lf.from_array(order, chunks=ROWS).persist(device=True))
    ran = _counting_tasks(monkeypatch)
    for i in range(3):
        assert _same(good.persist(device=True, **kw).compute(), a[order])
        assert len(ran) > i  # evaluated each time
    order[5] = 4 * ROWS + 7
    bad = x.index_select(0, lf.from_array(order, chunks=ROWS).persist(device=True))
    for _ in range(3):
        with pytest.raises(IndexError, match=rf"index {4 * ROWS + 7} at position 5 is out of range"):
            bad.persist(device=True, **kw)


def test_blocks_of_two_pools_replay_each_on_its_pool(vulkan, each_submit, monkeypatch):
    """`LAZYFUEL_DEVICES=i,i`: two pools on the one Vulkan device; each pool's blocks are replayed
    on it (a thread per pool), each result where its input lies, nothing crossing pools."""
    from lazyfuel.backends.vulkan import get_pool

    pool = each_submit
    monkeypatch.setenv("LAZYFUEL_DEVICES", f"{pool.info.index},{pool.info.index}")
    lf.config.reload()
    try:
        second = get_pool(pool.info.index, replica=1)
        second.allocator.poison = pool.allocator.poison
        _, x, y, want, _ = _w3()
        assert [b.pool for b in _blocks(x)] == [pool, second] * (BLOCKS // 2)
        y.persist(device=True)
        ran = _counting_tasks(monkeypatch)
        for _ in range(3):
            _poisoned_memory_freed(pool)
            with lf.profile() as p:
                r = y.persist(device=True)
            assert [b.pool for b in _blocks(r)] == [pool, second] * (BLOCKS // 2)
            assert p.devices[pool.label] == p.devices[second.label] == BLOCKS // 2 and p.bytes_peer == 0
            assert _same(r.compute(), want)
        assert ran == []
    finally:
        monkeypatch.delenv("LAZYFUEL_DEVICES")
        lf.config.reload()
