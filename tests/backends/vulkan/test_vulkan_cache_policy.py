"""Freed dedicated blocks kept for reuse (`cache_policy.py`), on the real device's allocator.

What a compute holds at once is kept whatever the fixed `cache_limit` says (issue 18: 16 threads
with chunks of 128 MiB and up each held four chunk-sized buffers, over the old 8 GiB cap, and
every compute made its page-locked staging again at ~3 GB/s); stale sizes make room for the
current ones; `cache_limit = 0` keeps nothing; `trim` forgets what was learnt.
"""

from __future__ import annotations

import pytest

from lazyfuel.backends.vulkan.memory import VulkanAllocator

MIB = 1 << 20


@pytest.fixture
def allocator(pool):
    """A fresh allocator on the pool's device: blocks of 64 MiB (dedicated past 16 MiB), a 1 MiB
    fixed cap."""
    found = VulkanAllocator(pool.device, pool.physical, pool.info, cache_limit=MIB)
    yield found
    found.destroy()


def hold(allocator, n, mib):
    return [allocator.alloc(mib * MIB) for _ in range(n)]


def release(allocator, allocations):
    for a in allocations:
        allocator.free(a)


def test_what_a_workload_holds_at_once_is_kept_past_the_fixed_cap(allocator):
    first = hold(allocator, 4, 24)
    release(allocator, first)
    assert allocator.resources()["blocks"] == 4  # 96 MiB kept, though the fixed cap is 1 MiB
    again = hold(allocator, 4, 24)
    assert {id(a.block) for a in again} == {id(a.block) for a in first}  # no new block
    release(allocator, again)


def test_stale_sizes_make_room_for_the_current_ones(allocator):
    release(allocator, hold(allocator, 4, 24))
    big = hold(allocator, 4, 40)
    release(allocator, big)
    kept = {id(a.block) for a in big}
    assert kept <= {id(b) for b in allocator._blocks}  # the 40 MiB blocks stayed, the 24 MiB ones went
    assert allocator.reserved <= 4 * 40 * MIB + 64 * MIB
    assert {id(a.block) for a in hold(allocator, 4, 40)} == kept


def test_a_zero_cache_limit_keeps_nothing(allocator):
    allocator.cache_limit = 0
    release(allocator, hold(allocator, 3, 24))
    assert allocator.resources()["blocks"] == 0


def test_trim_forgets_the_peak(allocator):
    release(allocator, hold(allocator, 4, 24))
    assert allocator.trim() == 4 * 24 * MIB
    release(allocator, hold(allocator, 1, 24))
    (big,) = hold(allocator, 1, 40)  # the peak is now 40 MiB (it was 96 before the trim)
    allocator.free(big)
    assert [b.size for b in allocator._blocks] == [40 * MIB]  # the 24 MiB block made room
