"""Fixtures for the fault-injection tests: pools of their own, checked for leaks and validation.

`fault_pools` sets `LAZYFUEL_BACKEND=vulkan`, puts the process's pools aside so that the test
builds (and may lose and rebuild) its own on the real device, and afterwards closes those and
puts the old ones back, so that a lost pool never reaches another test. Every pool the test saw
(`fault_pools.current()`) must end with nothing in use and no validation message; a lost one
must have been destroyed with every block freed. `uncached(pool)` turns the allocator's caches
off, so that every request is a new VkDeviceMemory block, where `faults.ALLOCATE` fires.
"""

from __future__ import annotations

import pytest

from lazyfuel.backends.vulkan import pool as pools
from lazyfuel.backends.vulkan import register
from lazyfuel.backends.vulkan.pool import DevicePool


class Pools:
    """The pools a test used: `current()` is the default pool now (recorded)."""

    def __init__(self) -> None:
        self.seen: list[DevicePool] = []

    def current(self) -> DevicePool:
        found = pools.get_pool()
        if found not in self.seen:
            self.seen.append(found)
        return found

    def held(self) -> DevicePool:
        """The default pool as the table holds it now, lost or not (recorded; nothing is built)."""
        found = pools._pools[(pools.resolve(), 0)]
        if found not in self.seen:
            self.seen.append(found)
        return found


@pytest.fixture
def fault_pools(vulkan: str):
    """Fresh pools for this test only; see the module docstring."""
    register()
    with pools._pools_lock:
        saved = dict(pools._pools)
        pools._pools.clear()
    tracker = Pools()
    tracker.current()
    try:
        yield tracker
        tracker.current()
        for pool in tracker.seen:
            assert pool.allocator.in_use == 0, f"{pool.label}: {pool.allocator.in_use} bytes still in use"
            assert not pool.validation_messages, "validation layer reported:\n" + "\n".join(
                pool.validation_messages[:10])
            if pool.lost:
                assert pool.closed and pool.allocator.reserved == 0, "a lost pool was not destroyed"
    finally:
        with pools._pools_lock:
            mine = list(pools._pools.values())
            pools._pools.clear()
            pools._pools.update(saved)
        for pool in mine:
            pool.close()


def uncached(pool: DevicePool) -> DevicePool:
    """Every allocation of `pool` a new block, freed at once (no free lists, no shared blocks)."""
    pool.allocator.trim()
    pool.allocator.block_size = 0
    pool.allocator.cache_limit = 0
    return pool
