"""A repeated device persist reuses its prepared graph (`graph.held_run`, issue 18 W3 host time),
on the real pool (lavapipe in CI) with the validation layer on and outputs poisoned.

Every result is compared bitwise with numpy on fresh random data; `lf.profile` counts programs
and submits (the `pool` fixture of test_batched: one submit per batched task)."""

from __future__ import annotations

import gc

import dask
import numpy as np
import pytest
from dask.callbacks import Callback
from dask.core import flatten

import lazyfuel as lf
from lazyfuel.backends.vulkan.resident_store import store_of
from lazyfuel.graph import held_run
from tests.backends.vulkan.test_vulkan_residency_persist_device import _blocks, _read, _same
from tests.graph.test_batched import _case


@pytest.fixture(autouse=True)
def _held_runs_evaluated(monkeypatch):
    """The held run's own behaviour: every task evaluated each run (no replay: test_replay)."""
    monkeypatch.setenv("LAZYFUEL_REPLAY_DEVICE_GRAPHS", "0")
    lf.config.reload()
    yield
    monkeypatch.undo()
    lf.config.reload()


def _counting_prepares(monkeypatch) -> list[int]:
    """One entry per `HeldRun.of` (a graph prepared anew); the real method runs."""
    made: list[int] = []
    real = held_run.HeldRun.of.__func__

    def counted(cls, arr):
        made.append(1)
        return real(cls, arr)

    monkeypatch.setattr(held_run.HeldRun, "of", classmethod(counted))
    return made


@pytest.mark.parametrize("kw", [{"num_workers": 2}, {"scheduler": "sync"}, {}])
def test_a_repeated_persist_reuses_its_graph_bit_exact(vulkan, pool, monkeypatch, kw):
    a, idx, mask, want = _case(8 * 16 - 5, 16)
    y = lf.from_array(a, chunks=(16, 24)).persist(device=True).index_select(0, idx).masked_fill(mask, -1.0)
    made = _counting_prepares(monkeypatch)
    held = [y.persist(device=True, **kw) for _ in range(3)]  # every result held across persists
    assert made == [1]  # prepared once, run three times
    for r in held:
        assert r.chunks == y.chunks and r.to_dask().name == held[0].to_dask().name
        assert _same(r.compute(), want)
    graph = held[0].to_dask()
    by_dask = y.persist(device=True, reuse_device_graphs=0, **kw).to_dask()  # its own settings: name
    assert sorted(graph.__dask_graph__()) == sorted(flatten(graph.__dask_keys__()))  # only the blocks
    assert sorted(k[1:] for k in graph.__dask_graph__()) == sorted(k[1:] for k in by_dask.__dask_graph__())
    assert graph.chunks == by_dask.chunks and graph.dtype == by_dask.dtype
    assert _same(_read(y.compute(device=True, **kw)), want)
    with lf.profile() as p:
        y.persist(device=True, num_workers=2)
    assert p.programs == 8 and p.submits == 2 and p.bytes_downloaded == 0


def test_the_graph_goes_with_the_settings(vulkan, pool, monkeypatch):
    a, idx, mask, want = _case(8 * 16, 16)
    y = lf.from_array(a, chunks=(16, 24)).persist(device=True).index_select(0, idx).masked_fill(mask, -1.0)
    made = _counting_prepares(monkeypatch)
    with lf.profile() as p:
        r1 = y.persist(device=True, num_workers=2)
    assert p.submits == 2
    with lf.profile() as p:  # config changed: one task per block, a graph of its own
        r2 = y.persist(device=True, num_workers=2, device_task_bytes=0)
    assert p.programs == p.submits == 8 and made == [1, 1]
    with lf.profile() as p:
        r3 = y.persist(device=True, num_workers=2)
    assert p.submits == 2 and made == [1, 1]
    with lf.config(reuse_device_graphs=False), lf.profile() as p:  # off: dask's persist
        r4 = y.persist(device=True, num_workers=2)
    assert p.submits == 2 and made == [1, 1]
    for r in (r1, r2, r3, r4):
        assert _same(r.compute(), want)


def test_dask_callbacks_keep_the_dask_path(vulkan, pool, monkeypatch):
    a, idx, mask, want = _case(4 * 16, 16)
    y = lf.from_array(a, chunks=(16, 24)).persist(device=True).index_select(0, idx).masked_fill(mask, -1.0)
    made = _counting_prepares(monkeypatch)
    seen: list[object] = []
    with Callback(pretask=lambda key, dsk, state: seen.append(key)):
        r = y.persist(device=True, num_workers=2)
    assert made == [] and seen  # dask ran the tasks and told the callback
    assert _same(r.compute(), want)
    assert not held_run.usable(dask.threaded.get, {"num_workers": 2, "pool": None})


def test_a_persist_after_blocks_spilled_reads_them_back_bit_exact(vulkan, pool):
    a, idx, mask, want = _case(8 * 16, 16)
    budget = 3 * 16 * 24 * 4 + 100  # room for 3 blocks: every persist spills the others
    with lf.config(device_memory_budget=budget):
        x = lf.from_array(a, chunks=(16, 24)).persist(device=True)
        y = x.index_select(0, idx).masked_fill(mask, -1.0)
        r1 = y.persist(device=True, num_workers=2)
        assert any(b.spilled for b in _blocks(x) + _blocks(r1))
        r2 = y.persist(device=True, num_workers=2)  # the same graph over spilled inputs
        assert _same(r1.compute(), want) and _same(r2.compute(), want) and _same(x.compute(), a)


def test_the_reused_graph_holds_no_results(vulkan, pool):
    a, idx, mask, want = _case(8 * 16, 16)
    y = lf.from_array(a, chunks=(16, 24)).persist(device=True).index_select(0, idx).masked_fill(mask, -1.0)
    assert _same(y.persist(device=True, num_workers=2).compute(), want)
    gc.collect()
    store = store_of(pool)
    before = (store.blocks, store.device_bytes)
    r = y.persist(device=True, num_workers=2)
    assert store.blocks == before[0] + 8
    del r
    gc.collect()
    assert (store.blocks, store.device_bytes) == before  # freed with the last Array holding them


@pytest.mark.parametrize("kw", [{"num_workers": 2}, {"scheduler": "sync"}])
def test_a_bad_index_is_named_on_every_run(vulkan, pool, kw):
    a = np.random.default_rng().standard_normal((64, 8)).astype(np.float32)
    x = lf.from_array(a, chunks=(16, 8)).persist(device=True)
    idx = np.arange(64)
    idx[37] = 99
    y = x.index_select(0, lf.from_array(idx, chunks=16).persist(device=True))
    bad = r"index 99 at position 37 is out of range; expected 0 <= index < 64"
    for _ in range(2):  # the second run is the reused graph's
        with pytest.raises(IndexError, match=bad):
            y.persist(device=True, **kw)
    assert _same(x.index_select(0, np.arange(64)[::-1].copy()).compute(device=True, **kw).__array__(),
                 a[::-1])


class _Held:
    """A value a task makes (weakly referable, as a resident block is)."""


@pytest.mark.parametrize("workers", [1, 2])
def test_an_intermediate_goes_once_its_last_reader_has_it(workers):
    """As dask releases a block once every task reading it has run, so does a HeldRun: a chain's
    intermediate is not held until the whole run ends (device memory would pile up)."""
    import weakref

    import dask.array as da

    made: list[weakref.ref] = []
    alive_at_last: list[bool] = []

    def make() -> _Held:
        held = _Held()
        made.append(weakref.ref(held))
        return held

    def middle(held: _Held) -> np.ndarray:
        return np.zeros(2)

    def last(x: np.ndarray) -> np.ndarray:
        gc.collect()
        alive_at_last.append(made[0]() is not None)
        return x + 1

    graph = {("src", 0): (make,), ("mid", 0): (middle, ("src", 0)), ("out", 0): (last, ("mid", 0))}
    arr = da.Array(graph, "out", chunks=((2,),), dtype=float, meta=np.empty(0))
    got = held_run.HeldRun.of(arr).run(workers)
    assert alive_at_last == [False]
    assert np.asarray(got).tolist() == [1.0, 1.0]


def test_the_holds_are_found_through_dasks_keyword_wrapper(vulkan, pool):
    """`hold_block`'s layer is a map_blocks with keyword arguments (dask wraps each call in
    `_pass_extra_kwargs`): its tasks are still the held run's holds, run on the calling thread
    where the block lies on a device already."""
    from lazyfuel.graph.resident import hold_block

    a, idx, mask, want = _case(4 * 16, 16)
    y = lf.from_array(a, chunks=(16, 24)).persist(device=True).index_select(0, idx).masked_fill(mask, -1.0)
    assert _same(y.persist(device=True, num_workers=2).compute(), want)
    (run,) = y._held_runs.values()
    assert len(run.holds) == 4 and all(held_run.calls(run.graph[k], hold_block) for k in run.holds)


def test_no_scheduler_named_and_no_distributed_is_dasks_threads_unasked(vulkan, pool, monkeypatch):
    """With no scheduler named (call or dask.config) and dask.distributed never imported, a
    persist or compute runs on dask's threads without `dask.base.get_scheduler`, which tries
    `from distributed import get_client` on every call (a `sys.path` search each persist where
    distributed is not installed, as on the H200 image: issue 18 W3, the time before the first
    submit). A scheduler named in dask.config still decides; the results are numpy's bits."""
    import sys

    from lazyfuel import array

    a, idx, mask, want = _case(4 * 16, 16)
    y = lf.from_array(a, chunks=(16, 24)).persist(device=True).index_select(0, idx).masked_fill(mask, -1.0)
    asked: list[object] = []
    real = array.get_scheduler
    monkeypatch.setattr(array, "get_scheduler", lambda **kw: asked.append(kw) or real(**kw))
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if not installed: never imported
    kept = [y.persist(device=True) for _ in range(2)]
    assert _same(y.compute(), want) and asked == []
    with dask.config.set(scheduler="sync"):
        assert _same(y.persist(device=True).compute(), want)
    assert asked and all(_same(r.compute(), want) for r in kept)
