"""`lazyfuel.backends.vulkan.queues`: how many compute queues to use (LAZYFUEL_VULKAN_QUEUES, at
most what the family has, at least one; a value that is no number refused naming the variable),
one lock per queue, recording contexts given queues round-robin. The real pool's device."""

from __future__ import annotations

import numpy as np
import pytest
import vulkan as vk

from lazyfuel.backends.vulkan.queues import DEFAULT_QUEUES, Queues, queue_count


def family_size(pool) -> int:
    return int(vk.vkGetPhysicalDeviceQueueFamilyProperties(pool.physical)[pool.queue_family].queueCount)


def test_the_count_is_what_is_asked_within_what_the_family_has(pool, monkeypatch):
    has = family_size(pool)
    assert queue_count(pool.physical, pool.queue_family, "") == min(DEFAULT_QUEUES, has)
    assert queue_count(pool.physical, pool.queue_family, "0") == 1
    assert queue_count(pool.physical, pool.queue_family, " 1000 ") == has
    monkeypatch.setenv("LAZYFUEL_VULKAN_QUEUES", "1")
    assert queue_count(pool.physical, pool.queue_family) == 1
    with pytest.raises(ValueError, match=r"^LAZYFUEL_VULKAN_QUEUES='many': expected a number of queues"):
        queue_count(pool.physical, pool.queue_family, "many")


def test_queues_are_handed_out_round_robin_each_with_its_lock(pool):
    n = queue_count(pool.physical, pool.queue_family, "1000")
    queues = Queues(pool.device, pool.queue_family, n)
    assert len(queues) == n == len(queues.locks) and len(set(map(id, queues.locks))) == n
    assert [queues.next_slot() for _ in range(2 * n + 1)] == [i % n for i in range(2 * n + 1)]
    assert queues.handles[0] == pool.queues.handles[0]  # the device hands out the same queue 0


def test_work_submitted_through_the_pools_queues_runs(pool):
    data = np.random.default_rng().integers(0, 2**32, 4096, dtype=np.uint32)
    back = np.empty_like(data)
    with pool.batch() as batch:
        buf = batch.alloc(data.nbytes)
        batch.upload(buf, data.view(np.uint8))  # upload takes bytes
        batch.download(buf, back)
        batch.run()
    assert back.tobytes() == data.tobytes()
