"""How a thread waits for a Vulkan fence: awake for a short while first, then asleep.

`vkWaitForFences` puts the thread to sleep until the driver wakes it, and a late wake delays every
task's next step. On the H200 (session 12, BENCHMARKS "Session 12") W1 through the public API ran
34.8 / 40.4 GB/s at 8 / 64 MiB chunks with the wait polled first, against 28.0 / 35.9 asleep (1 GiB
chunks the same); one resident 1 GiB block's `compute(device=True)` went 1.60 -> 1.31 ms in one
call and not in the next. CUDA's own default wait spins the same way where a core is free
(`cudaDeviceScheduleAuto`).

So `FenceWaiter.wait` polls the fence for up to `spin_s` seconds, then sleeps in
`vkWaitForFences` for whatever is left. One thread of a pool polls at a time (the others sleep at
once): a waiting pool costs one core at most, however many tasks wait. Each poll is a C call that
releases the GIL, so the poller hands the GIL over to any thread that wants it. The default
(`spin_for`) is `SPIN_S` on GPUs and none on CPU devices: lavapipe runs the work on the cores a
poller would take.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import vulkan as vk

from lazyfuel.backends.vulkan.check import VK_NOT_READY, VK_TIMEOUT

SPIN_S = 0.002  # a GPU pool's default: most short tasks' waits, one core kept this long at most
_WAIT_NS = 1_000_000_000  # asleep, wake up each second: a stuck device is still reported


def spin_for(setting: float | None, kind: str) -> float:
    """Seconds a pool's waiter polls before it sleeps: `setting` (the `fence_spin` knob) where
    given, else `SPIN_S` on a GPU and 0 on a CPU device (`kind`: `DeviceInfo.kind`)."""
    if setting is not None:
        return float(setting)
    return 0.0 if kind == "cpu" else SPIN_S


class FenceWaiter:
    """Waits on `device`'s fences for one pool; see the module docstring."""

    def __init__(self, device: Any, spin_s: float) -> None:
        self.device = device
        self.spin_s = spin_s  # tests and probes change it on a live pool
        self._poller = threading.Lock()  # held by the one thread polling now

    def wait(self, fence_ptr: Any) -> int:
        """Wait until the fence at `fence_ptr` (a `VkFence*`) signals: vkWaitForFences' result
        (VK_SUCCESS, or an error such as VK_ERROR_DEVICE_LOST; never VK_TIMEOUT)."""
        if self.spin_s > 0 and self._poller.acquire(blocking=False):
            try:
                end = time.perf_counter() + self.spin_s
                status, fence = vk.lib.vkGetFenceStatus, fence_ptr[0]
                while status(self.device, fence) == VK_NOT_READY and time.perf_counter() < end:
                    pass
            finally:
                self._poller.release()
        while True:  # signalled (or lost) by now returns at once, with the result checked as ever
            result = vk.lib.vkWaitForFences(self.device, 1, fence_ptr, 1, _WAIT_NS)
            if result != VK_TIMEOUT:
                return result
