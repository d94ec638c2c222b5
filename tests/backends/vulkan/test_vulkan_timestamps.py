"""`lazyfuel.backends.vulkan.timestamps`: whether the compute queue writes timestamps, query pools
of a checked size and indices, and timestamps read in nanoseconds that rise across recorded work
(an upload, a copy and a download of fresh random bytes, which come back whole). The real pool's
device."""

from __future__ import annotations

import numpy as np
import pytest
import vulkan as vk

from lazyfuel.backends.vulkan import timestamps
from lazyfuel.backends.vulkan.timestamps import Timestamps


def test_support_is_the_queue_familys_valid_bits_asked_once(pool):
    family = vk.vkGetPhysicalDeviceQueueFamilyProperties(pool.physical)[pool.queue_family]
    assert timestamps.supported(pool) is (int(family.timestampValidBits) > 0)
    assert timestamps._supported[pool] is timestamps.supported(pool)


def test_a_pool_of_no_queries_is_refused(pool):
    with pytest.raises(ValueError, match=r"^Timestamps: count must be at least 1, got 0$"):
        Timestamps(pool, 0)


def test_timestamps_rise_and_read_in_nanoseconds(pool):
    if not timestamps.supported(pool):
        pytest.skip("this device's compute queue writes no timestamps")
    stamps = Timestamps(pool, 4)
    try:
        data = np.random.default_rng().integers(0, 255, 1 << 20, dtype=np.uint8)
        with pool.batch() as batch:
            stamps.reset(batch)
            stamps.write(batch, 0)
            src, dst = batch.alloc(data.nbytes), batch.alloc(data.nbytes)
            batch.upload(src, data)
            stamps.write(batch, 1)
            batch.copy(src, 0, dst, 0, data.nbytes)
            stamps.write(batch, 2)
            back = np.empty_like(data)
            batch.download(dst, back)
            batch.run()
        assert back.tobytes() == data.tobytes()
        t = stamps.read(3)
        assert t.dtype == np.float64 and t.shape == (3,)
        assert t[0] <= t[1] <= t[2] and t[2] > t[0]
        assert 1 <= stamps.valid_bits <= 64 and stamps.period_ns > 0
        with pytest.raises(IndexError, match=r"^Timestamps: query 4 outside 0\.\.3$"):
            with pool.batch() as batch:
                stamps.write(batch, 4)
        with pytest.raises(IndexError, match=r"query -1 outside"):
            with pool.batch() as batch:
                stamps.write(batch, -1)
    finally:
        stamps.destroy()
