"""`lazyfuel.graph.resident`: blocks persisted in device memory (`persist(device=True)`): each block
task's result held by the best backend that keeps blocks (here Vulkan on lavapipe), source chunks
and host blocks copied there, the handles listed in block order, and a graph holding host blocks
refused for `compute(device=True)` with why. Fresh random data compared bit for bit."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel.backends import base
from lazyfuel.contracts.model import Backend
from lazyfuel.graph.resident import _holder, held_blocks, hold_block, on_device
from lazyfuel.graph.task import device_for
from lazyfuel.runtime import DefaultRuntime

RNG = np.random.default_rng()


def test_the_holder_is_the_best_backend_that_keeps_blocks(vulkan):
    holder = _holder(0)
    assert holder is base.holder(Backend.Vulkan, device_for(0, Backend.Vulkan))  # ranked above the others
    assert _holder(3) is base.holder(Backend.Vulkan, device_for(3, Backend.Vulkan))


def test_a_host_chunk_is_held_on_the_device_and_reads_back_whole(vulkan):
    a = RNG.standard_normal((3, 5)).astype(np.float32)
    block = hold_block(a, DefaultRuntime.current(), (2, 1), (1, 0))
    assert base.is_device_block(block)
    assert np.asarray(block).tobytes() == a.tobytes()
    again = hold_block(block, DefaultRuntime.current(), (2, 1), (1, 0))
    assert again is block  # already on its device: passed on as it is


def test_persisted_blocks_are_device_handles_in_block_order(vulkan):
    a = RNG.integers(0, 1000, (10, 4)).astype(np.int64)
    x = lf.from_array(a, chunks=(3, 4)).index_select(0, [9, 8, 1, 0, 5])
    with lf.config(_resident=True):
        runtime = DefaultRuntime.current()
        held = on_device(x.to_dask(), runtime).persist(scheduler="sync")
    blocks = held_blocks(held)
    assert len(blocks) == len(held.chunks[0]) and all(base.is_device_block(b) for b in blocks)
    assert np.concatenate([np.asarray(b) for b in blocks]).tobytes() == a[[9, 8, 1, 0, 5]].tobytes()
    assert held.name.startswith("lazyfuel-hold-")


def test_a_graph_of_host_blocks_is_refused_naming_what_it_holds():
    held = da.from_array(np.zeros((4, 4)), chunks=2).persist(scheduler="sync")
    with pytest.raises(RuntimeError, match=r"^compute\(device=True\) needs the blocks in this process, and "
                                           r"the graph holds ndarray \(dask\.distributed keeps them"):
        held_blocks(held)


def test_device_workers_are_one_per_queue_at_least_four_at_most_the_cpus(vulkan, monkeypatch):
    from lazyfuel.graph import resident

    queues = sum(base.holder(Backend.Vulkan, i).queue_count
                 for i in range(max(len(base.devices(Backend.Vulkan)), 1)))
    monkeypatch.setattr(resident.os, "cpu_count", lambda: 64)
    assert resident.device_workers() == max(resident.MIN_DEVICE_WORKERS, queues)
    monkeypatch.setattr(resident.os, "cpu_count", lambda: 2)
    assert resident.device_workers() == 2


@pytest.mark.parametrize("reuse", [False, True])
def test_results_on_the_device_run_on_device_workers_unless_told(vulkan, monkeypatch, reuse):
    import dask
    import dask.base

    from lazyfuel import array
    from lazyfuel.graph.held_run import HeldRun

    seen, persist, run = [], dask.base.persist, HeldRun.run

    def spy(*args, **kwargs):
        seen.append(kwargs.get("num_workers"))
        return persist(*args, **kwargs)

    def run_spy(self, workers):  # the prepared graph's run: the threads it was given
        seen.append(None if workers == 1 else workers)
        return run(self, workers)

    monkeypatch.setattr(dask.base, "persist", spy)
    monkeypatch.setattr(HeldRun, "run", run_spy)
    monkeypatch.setattr(array, "device_workers", lambda: 3)
    a = RNG.standard_normal((40, 4)).astype(np.float32)
    x = lf.from_array(a, chunks=(10, 4))
    with lf.config(reuse_device_graphs=reuse):  # dask's persist, or the prepared graph's run
        assert np.asarray(x.compute(device=True)).tobytes() == a.tobytes()
        x.persist(device=True)
        x.persist(device=True, num_workers=2)  # the caller's count, and any scheduler, as given
        x.persist(device=True, scheduler="sync")
        with dask.config.set(scheduler="sync"):
            x.persist(device=True)
    assert seen == [3, 3, 2, None, None]
