"""Several devices in one process: the spread list, one pool per (device, replica), one executor each.

Here there is one device (lavapipe), so `LAZYFUEL_DEVICES=0,0` stands in for two GPUs: two pools
on the same physical device, each with its own VkDevice, queue and memory.
"""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel.api import DefaultRuntime
from lazyfuel.backends.base import devices, executor
from lazyfuel.backends.vulkan import get_pool, spread_labels
from lazyfuel.backends.vulkan.devices import spread
from lazyfuel.backends.vulkan.executor import VulkanExecutor
from lazyfuel.backends.vulkan.pool import spread_slot, spread_slots
from lazyfuel.contracts.model import Backend
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.planner import Chain, OpNode
from lazyfuel.providers import default_registry

POISON = 0xA5  # as conftest.py poisons the default pool


@pytest.fixture
def second(pool, monkeypatch):
    """`LAZYFUEL_DEVICES=0,0`: the second pool on the test device, poisoned."""
    monkeypatch.setenv("LAZYFUEL_DEVICES", f"{pool.info.index},{pool.info.index}")
    found = get_pool(pool.info.index, replica=1)
    found.allocator.poison = POISON
    return found  # its validation messages are checked with every open pool's (tests/conftest.py)


@pytest.fixture
def infos(pool):
    """Four devices as a two-GPU machine with lavapipe and an old GPU would list them."""
    def fake(index: int, kind: str, name: str, usable: bool = True):
        return dataclasses.replace(pool.info, index=index, kind=kind, name=name,
                                   buffer_device_address=usable)

    return [fake(0, "cpu", "llvmpipe"), fake(1, "discrete", "NVIDIA H200"),
            fake(2, "discrete", "NVIDIA H200"), fake(3, "discrete", "Old GPU", usable=False)]


def test_spread_list_from_the_environment(infos, monkeypatch):
    monkeypatch.delenv("LAZYFUEL_DEVICES", raising=False)
    monkeypatch.delenv("LAZYFUEL_DEVICE", raising=False)
    assert spread(infos) == [1, 2]  # every usable device of the best kind, never the CPU beside them
    monkeypatch.setenv("LAZYFUEL_DEVICE", "2")
    assert spread(infos) == [2]  # a pinned device alone (a dask worker pinned to one GPU)
    assert spread(infos, "0,0") == [0, 0]
    assert spread(infos, " h200 , llvm,1") == [1, 0, 1]
    with pytest.raises(RuntimeError, match="LAZYFUEL_DEVICES item='7' matches no Vulkan device"):
        spread(infos, "1,7")
    with pytest.raises(RuntimeError, match="LAZYFUEL_DEVICES item='3' picks Old GPU, which lacks"):
        spread(infos, "3")


def test_a_repeated_device_gets_a_pool_of_its_own(pool, second):
    assert get_pool() is pool and get_pool(pool.info.index) is pool
    assert get_pool(pool.info.name) is pool and get_pool(str(pool.info.index)) is pool
    assert second is not pool and second.device != pool.device and second.info == pool.info
    assert spread_slots() == [(pool.info.index, 0), (pool.info.index, 1)]
    assert spread_labels() == [pool.label, second.label] and second.label.endswith("(pool 2)")
    assert devices(Backend.Vulkan) == spread_labels()
    with pytest.raises(IndexError, match="spread over 2 device"):
        spread_slot(2)


def select_program(shape: tuple[int, int], n: int):
    """A one-step Vulkan program: index_select along dim 0 of an F32 matrix."""
    chain = Chain(2, (OpNode("IndexSelect", (0, 1), (("dim", 0),)),), (2,))
    planner = DefaultRuntime("vulkan").planner()
    return planner.plan(chain, [DType.F32, DType.U32], [Layout.contiguous(shape), Layout.contiguous((n,))])


def test_an_executor_per_device_runs_on_its_pool(pool, second):
    default_registry()
    first, other = executor(Backend.Vulkan, device=0), executor(Backend.Vulkan, device=1)
    assert isinstance(other, VulkanExecutor) and other.pool is second and first.pool is pool
    assert executor(Backend.Vulkan, device=1) is other and executor(Backend.Vulkan) is not other
    assert executor(Backend.Cpu, device=1) is executor(Backend.Cpu)  # one device: the number is ignored
    a = np.arange(40, dtype=np.float32).reshape(10, 4)
    idx = np.array([9, 0, 3, 3], np.uint32)
    program = select_program(a.shape, len(idx))
    before = (pool.submits, second.submits)
    with lf.profile() as p:
        (got,) = other.run(program, [a, idx])
    assert (pool.submits - before[0], second.submits - before[1]) == (0, 1)
    assert np.array_equal(got, a[idx]) and p.devices == {second.label: 1}


def test_two_pools_used_from_many_threads_do_not_deadlock(pool, second):
    default_registry()
    a = np.arange(4096, dtype=np.float32).reshape(256, 16)
    idx = np.arange(255, -1, -1, dtype=np.uint32)
    program = select_program(a.shape, len(idx))
    errors: list[BaseException] = []

    def work(number: int) -> None:
        try:
            run = executor(Backend.Vulkan, device=number % 2).run
            for _ in range(20):
                (got,) = run(program, [a, idx])
                assert np.array_equal(got, a[::-1])
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    before = (pool.submits, second.submits)
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "threads still running after 120 s: a deadlock"
    assert not errors, errors[0]
    assert (pool.submits - before[0], second.submits - before[1]) == (60, 60)


def test_a_block_home_and_the_labels_follow_the_spread_they_are_asked_under(pool, second):
    """`ResidentBlock.home` and `spread_labels` are remembered per spread (`pool.spread_tuple`):
    a block of the second pool is device 1 while both pools are spread over, none of them once
    the spread is the first pool alone, and device 1 again once both are back."""
    default_registry()
    block = executor(Backend.Vulkan, device=1).hold(np.arange(12, dtype=np.float32))
    both, alone = f"{pool.info.index},{pool.info.index}", str(pool.info.index)
    with lf.config(devices=both):
        assert block.home == (Backend.Vulkan, 1) and block.home == (Backend.Vulkan, 1)
        assert spread_labels() == [pool.label, second.label]
    with lf.config(devices=alone):
        assert spread_slots() == [(pool.info.index, 0)]
        assert block.home == (Backend.Vulkan, None) and spread_labels() == [pool.label]
    with lf.config(devices=both):
        assert block.home == (Backend.Vulkan, 1) and spread_labels() == [pool.label, second.label]
    assert np.asarray(block).tobytes() == np.arange(12, dtype=np.float32).tobytes()


def test_a_capability_is_remembered_per_executor_class():
    """`base.holder` asks whether an executor keeps blocks once per class (`base._has`): a
    Vulkan executor does, an object of another class does not, asked in either order."""
    from lazyfuel.backends.base import BlockHolder, _has

    default_registry()
    vulkan = executor(Backend.Vulkan)
    assert not _has(object(), BlockHolder) and _has(vulkan, BlockHolder)
    assert _has(vulkan, BlockHolder) and not _has(object(), BlockHolder)
    assert not _has(vulkan, type("Other", (), {}))  # another capability: asked on its own
