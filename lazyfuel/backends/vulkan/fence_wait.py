"""How a thread waits for a Vulkan fence: awake for a short while first, then asleep.

`vkWaitForFences` puts the thread to sleep until the driver wakes it, and a late wake delays every
task's next step; CUDA's own default wait spins where a core is free (`cudaDeviceScheduleAuto`).
`FenceWaiter.wait` polls the fence for up to `spin_s` seconds (the `fence_spin` knob), then sleeps
in `vkWaitForFences` for whatever is left. One thread of a pool polls at a time (the others sleep
at once): a waiting pool costs one core at most, however many tasks wait. Each poll is a C call
that releases the GIL, so the poller hands the GIL over to any thread that wants it.

Off by default (`fence_spin` 0): on the H200 (session 12, BENCHMARKS "Session 12") W1 at 8 MiB
chunks ran 35.6 against 26.6 GB/s page-locked polled vs asleep in one call, and 22.7 / 33.3 against
25.8 / 25.9 in four processes of a later one; one 1 GiB block's `compute(device=True)` went 1.60 ->
1.31 ms in one call and 1.84 -> 1.98 in the next. The process-to-process spread is as large as the
gain, so polling is there to be chosen, not the default. On CPU devices (lavapipe runs the work on
the cores a poller would take) it is never worth it.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import vulkan as vk

from lazyfuel.backends.vulkan.check import VK_NOT_READY, VK_TIMEOUT

_WAIT_NS = 1_000_000_000  # asleep, wake up each second: a stuck device is still reported


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
