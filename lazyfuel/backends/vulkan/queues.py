"""Several queues of the compute family, so that concurrent tasks' command buffers overlap.

Within one queue a pipeline barrier waits for every earlier command in submission order, so one
task's upload could not start before the previous task's kernels ended: chunks would move and
compute in turn. Each recording context is given one of up to `LAZYFUEL_VULKAN_QUEUES` (default
4) queues of the compute family, round-robin, so while one dask thread's chunk computes, another
thread's chunk uploads or downloads. Each queue has its own lock (the `vulkan` wrappers take
none) held only around `vkQueueSubmit`, never while waiting on a fence. lavapipe has one queue:
everything then goes to it, as before.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

import vulkan as vk

from lazyfuel.backends.vulkan import faults
from lazyfuel.backends.vulkan.check import check
from lazyfuel.settings import config

DEFAULT_QUEUES = 4
ENV = "LAZYFUEL_VULKAN_QUEUES"


def queue_count(physical: Any, family: int, wanted: str | None = None) -> int:
    """How many queues of `family` to use: `wanted` (default `LAZYFUEL_VULKAN_QUEUES`, else 4),
    at most what the family has and at least 1. ValueError for a value that is not a number."""
    text = str(config.vulkan_queues or "") if wanted is None else wanted
    try:
        asked = int(text) if text.strip() else DEFAULT_QUEUES
    except ValueError:
        raise ValueError(f"{ENV}={text!r}: expected a number of queues (1, 2, …)") from None
    available = vk.vkGetPhysicalDeviceQueueFamilyProperties(physical)[family].queueCount
    return max(1, min(asked, int(available)))


class Queues:
    """The device's queues of one family, each with the lock that serialises submits to it."""

    def __init__(self, device: Any, family: int, count: int) -> None:
        handles = []
        for i in range(count):
            queue = vk.ffi.new("VkQueue*")
            vk.lib.vkGetDeviceQueue(device, family, i, queue)
            handles.append(queue[0])
        self.handles = handles
        self.locks = [threading.Lock() for _ in handles]
        self._next = itertools.count()

    def __len__(self) -> int:
        return len(self.handles)

    def next_slot(self) -> int:
        """The queue a new recording context submits to (round-robin)."""
        return next(self._next) % len(self.handles)

    def submit(self, slot: int, submit_info: Any, fence: Any) -> None:
        """vkQueueSubmit one VkSubmitInfo to queue `slot`, signalling `fence`."""
        with self.locks[slot]:
            injected = faults.due(faults.SUBMIT) if faults.armed else 0  # a test hook; 0 when off
            result = injected or vk.lib.vkQueueSubmit(self.handles[slot], 1, submit_info, fence)
            check(result, "vkQueueSubmit")
