"""Fault injection: a TEST HOOK that makes real Vulkan calls report failures. Never used in production.

Tests of what lazyfuel does when the device runs out of memory or is lost need those faults on
demand, on the real device, pool and kernels (nothing is mocked). Three call sites consult this
module where they check the real call's VkResult, so an injected fault takes exactly the path a
real one takes, through `check.py`'s translation (VulkanMemoryError, DeviceLostError):

- `ALLOCATE`, where `VulkanAllocator` makes a new block: VK_ERROR_OUT_OF_DEVICE_MEMORY; the real
  vkAllocateMemory is not made (nothing to free), the buffer made for it is destroyed as on a
  real failure.
- `SUBMIT`, in `Queues.submit`: VK_ERROR_DEVICE_LOST; the real vkQueueSubmit is not made (the
  work never starts).
- `WAIT`, in `DevicePool.wait`: VK_ERROR_DEVICE_LOST after the real vkWaitForFences returned
  (the work has finished, as on a lost device, where nothing runs any more).

    with faults.out_of_device_memory(count=1, after=2) as oom:   # the 3rd new block fails
        ...
    assert oom.fired == 1

    with faults.device_lost(count=2, at=faults.WAIT):            # the next two fence waits
        ...

An allocation here is a new VkDeviceMemory block: requests the allocator serves from its free
lists or from the free end of a block make no Vulkan call and are never failed (tests that want
every request to reach the device turn the caches off: `block_size`, `cache_limit`). `after`
lets that many calls at the site pass before the `count` faults; `fired` counts the faults
actually injected, so a test can tell a fault that never happened from one that was handled.
Faults are process-wide (any pool, any thread: the first calls to reach the site take them) and
armings at one site do not nest. Off (the default) a site costs one module attribute read.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

from lazyfuel.backends.vulkan.check import VK_ERROR_DEVICE_LOST, VK_ERROR_OUT_OF_DEVICE_MEMORY

ALLOCATE = "vkAllocateMemory"
SUBMIT = "vkQueueSubmit"
WAIT = "vkWaitForFences"
SITES = (ALLOCATE, SUBMIT, WAIT)

armed = False  # any fault armed: the call sites read this first, so a disarmed hook costs nothing


@dataclass
class Armed:
    """Faults armed at one site: `after` calls pass, then `count` calls get `result`; `fired`
    counts those injected so far."""

    site: str
    result: int
    count: int
    after: int = 0
    fired: int = 0
    calls: int = 0


_lock = threading.Lock()
_armed: dict[str, Armed] = {}


def due(site: str) -> int:
    """The VkResult to report at `site` instead of the real call's: a failure code when a fault
    is due there now (it is then used up), else 0 (VK_SUCCESS: make the real call)."""
    with _lock:
        fault = _armed.get(site)
        if fault is None:
            return 0
        fault.calls += 1
        if fault.calls <= fault.after or fault.fired >= fault.count:
            return 0
        fault.fired += 1
        return fault.result


@contextmanager
def inject(site: str, result: int, count: int = 1, after: int = 0) -> Iterator[Armed]:
    """Within the block, calls at `site` (one of `SITES`) after the first `after` report `result`,
    `count` times; yields the `Armed` record (its `fired` says how many were injected).
    ValueError for an unknown site, negative counts, or a site already armed."""
    global armed
    if site not in SITES:
        raise ValueError(f"fault site {site!r}: expected one of {', '.join(SITES)}")
    if count < 0 or after < 0:
        raise ValueError(f"fault counts must be >= 0, got count={count}, after={after}")
    fault = Armed(site, result, count, after)
    with _lock:
        if site in _armed:
            raise ValueError(f"faults are already armed at {site}; arm each site once at a time")
        _armed[site] = fault
        armed = True
    try:
        yield fault
    finally:
        with _lock:
            del _armed[site]
            armed = bool(_armed)


def out_of_device_memory(count: int = 1, after: int = 0) -> AbstractContextManager[Armed]:
    """`inject(ALLOCATE, VK_ERROR_OUT_OF_DEVICE_MEMORY, count, after)`: new memory blocks fail."""
    return inject(ALLOCATE, VK_ERROR_OUT_OF_DEVICE_MEMORY, count, after)


def device_lost(count: int = 1, after: int = 0, at: str = WAIT) -> AbstractContextManager[Armed]:
    """`inject(at, VK_ERROR_DEVICE_LOST, count, after)` for `at` = SUBMIT or WAIT."""
    if at not in (SUBMIT, WAIT):
        raise ValueError(f"device loss is reported by {SUBMIT} or {WAIT}, not {at!r}")
    return inject(at, VK_ERROR_DEVICE_LOST, count, after)
