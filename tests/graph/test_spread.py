"""Spreading a graph's blocks over several devices: block i runs on device i mod n, a fused chain
stays on one device, results are bit-equal, threads do not deadlock, explain names the devices.

One lavapipe here: `LAZYFUEL_DEVICES=0,0` gives two pools (two VkDevices) on it, and each pool
counts its submits, so the tests see which pool every block went to.
"""

from __future__ import annotations

import threading

import dask
import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel.contracts.model import Backend
from lazyfuel.graph.task import device_for

A = np.arange(24 * 16, dtype=np.float32).reshape(24, 16)
IDX = np.array([15, 0, 7, 7, 2], np.int64)
MASK = (np.arange(24 * 5) % 3 == 0).reshape(24, 5)
WANT = np.where(MASK, np.float32(-1), A[:, IDX])


@pytest.fixture
def pools(vulkan, monkeypatch):
    """The two pools of `LAZYFUEL_DEVICES=i,i` on the Vulkan device here (Vulkan forced)."""
    from lazyfuel.backends.vulkan import get_pool

    index = get_pool().info.index
    monkeypatch.setenv("LAZYFUEL_DEVICES", f"{index},{index}")
    monkeypatch.setenv("LAZYFUEL_TASK_BYTES", "0")  # one task per block: the tests count them
    return get_pool(index), get_pool(index, replica=1)


def pipeline(rows: int = 4) -> lf.Array:
    """A fused chain per block: index_select along the unchunked axis, then masked_fill."""
    return lf.from_array(A, chunks=(rows, 16)).index_select(1, IDX).masked_fill(MASK, -1.0)


def submits(pools) -> tuple[int, int]:
    return tuple(p.submits for p in pools)


def test_device_for_is_round_robin_by_block_number(pools):
    assert [device_for(b, Backend.Vulkan) for b in range(5)] == [0, 1, 0, 1, 0]
    assert device_for(3, Backend.Cpu) is None


def test_blocks_alternate_between_the_pools_and_results_are_bit_equal(pools, bits_equal):
    y = pipeline()  # 6 blocks of 4 rows
    arr = y.to_dask()
    graph = dict(arr.__dask_graph__())
    seen = []
    for key in dask.core.flatten(arr.__dask_keys__()):  # row-major: blocks 0, 1, 2, ...
        before = submits(pools)
        dask.get(graph, key)
        after = submits(pools)
        seen.append(tuple(a - b for a, b in zip(after, before)))
    assert seen == [(1, 0), (0, 1)] * 3  # one submit each: the fused chain stayed on one pool
    with lf.profile() as p:
        bits_equal(y.compute(scheduler="threads"), WANT)
    assert sorted(p.devices.values()) == [3, 3] and p.submits == 6


def test_one_device_and_two_give_the_same_bits(pools, bits_equal, monkeypatch):
    two = pipeline(rows=3).compute()
    monkeypatch.setenv("LAZYFUEL_DEVICES", str(pools[0].info.index))
    before = submits(pools)
    one = pipeline(rows=3).compute()
    assert submits(pools)[1] == before[1] and submits(pools)[0] == before[0] + 8
    bits_equal(two, one)
    bits_equal(one, WANT)


def test_many_threads_over_two_pools_do_not_deadlock(pools, bits_equal):
    y = lf.from_array(A, chunks=(1, 16)).index_select(1, IDX).masked_fill(MASK, -1.0)  # 24 blocks
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(5):
                results.append(y.compute(scheduler="threads", num_workers=6))
        except BaseException as err:
            errors.append(err)

    before = submits(pools)
    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert not any(t.is_alive() for t in threads), "compute still running after 180 s: a deadlock"
    assert not errors, errors[0]
    for got in results:
        bits_equal(got, WANT)
    assert tuple(a - b for a, b in zip(submits(pools), before)) == (15 * 12, 15 * 12)


def test_explain_names_the_devices(pools):
    text = lf.explain(pipeline())
    assert "6 task(s) spread over 2 Vulkan devices (task i on device i mod 2" in text
    assert pools[0].label in text and pools[1].label in text
