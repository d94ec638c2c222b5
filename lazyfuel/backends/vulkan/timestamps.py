"""GPU timestamps: a VkQueryPool of timestamp queries, read back in nanoseconds.

    stamps = Timestamps(pool, 2)
    with pool.batch() as batch:
        stamps.reset(batch); stamps.write(batch, 0)
        ...                              # the work to time
        stamps.write(batch, 1); batch.run()
    elapsed_ns = stamps.read()[1] - stamps.read()[0]

A timestamp is written once all work recorded before it has finished (bottom of pipe). Ticks
are converted with the device's `timestampPeriod` (ns per tick) and masked to the queue family's
`timestampValidBits`. The device must support timestamps on its compute queue.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import numpy as np
import vulkan as vk

from lazyfuel.backends.vulkan.check import check

if TYPE_CHECKING:
    from lazyfuel.backends.vulkan.batch import Batch
    from lazyfuel.backends.vulkan.pool import DevicePool

_RESULT_FLAGS = vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT


_supported: weakref.WeakKeyDictionary[DevicePool, bool] = weakref.WeakKeyDictionary()


def supported(pool: DevicePool) -> bool:
    """Whether `pool`'s compute queue writes timestamps (`Timestamps` raises RuntimeError if not)."""
    found = _supported.get(pool)
    if found is None:
        family = vk.vkGetPhysicalDeviceQueueFamilyProperties(pool.physical)[pool.queue_family]
        found = _supported[pool] = int(family.timestampValidBits) > 0
    return found


class Timestamps:
    """`count` timestamp queries on `pool`'s device; `read()` gives nanoseconds as float64."""

    def __init__(self, pool: DevicePool, count: int) -> None:
        if count < 1:
            raise ValueError(f"Timestamps: count must be at least 1, got {count}")
        limits = vk.vkGetPhysicalDeviceProperties(pool.physical).limits
        family = vk.vkGetPhysicalDeviceQueueFamilyProperties(pool.physical)[pool.queue_family]
        self.valid_bits = int(family.timestampValidBits)
        if self.valid_bits == 0:
            raise RuntimeError(f"{pool.info.name}: its compute queue has no timestamps "
                               "(timestampValidBits 0)")
        self.period_ns = float(limits.timestampPeriod)
        self.device, self.count = pool.device, count
        ffi = vk.ffi
        info = ffi.new("VkQueryPoolCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, "queryType": vk.VK_QUERY_TYPE_TIMESTAMP,
            "queryCount": count})
        out = ffi.new("VkQueryPool*")
        check(vk.lib.vkCreateQueryPool(self.device, info, ffi.NULL, out), "vkCreateQueryPool")
        self.handle = out[0]
        self._data = ffi.new("uint64_t[]", count)

    def reset(self, batch: Batch) -> None:
        """Record the reset of every query (before the batch writes any)."""
        batch.reset_queries(self.handle, 0, self.count)

    def write(self, batch: Batch, index: int) -> None:
        """Record timestamp `index`, taken once everything recorded before it has finished."""
        if not 0 <= index < self.count:
            raise IndexError(f"Timestamps: query {index} outside 0..{self.count - 1}")
        batch.timestamp(self.handle, index)

    def read(self, count: int | None = None) -> np.ndarray:
        """The first `count` (default all) timestamps in ns, after the batch that wrote them ran."""
        n = self.count if count is None else count
        ffi = vk.ffi
        result = vk.lib.vkGetQueryPoolResults(self.device, self.handle, 0, n, 8 * n, self._data, 8,
                                              _RESULT_FLAGS)
        check(result, "vkGetQueryPoolResults")
        ticks = np.frombuffer(ffi.buffer(self._data, 8 * n), np.uint64).copy()
        if self.valid_bits < 64:
            ticks &= np.uint64((1 << self.valid_bits) - 1)
        return ticks.astype(np.float64) * self.period_ns

    def destroy(self) -> None:
        """Destroy the query pool (no batch using it may still run)."""
        vk.lib.vkDestroyQueryPool(self.device, self.handle, vk.ffi.NULL)
