"""The budget of one pool's resident blocks (`persist(device=True)`): `ResidentStore`, `store_of`.

Each pool has one `ResidentStore` (`store_of(pool)`) keeping its blocks' bytes (`_Slot`) under a
budget, `lazyfuel.config.device_memory_budget` (a fraction of the device heap, default 0.8, or
bytes), read whenever a block needs room. Making room spills the least recently used blocks that
no batch is reading (not pinned) to host memory; a spilled block comes back to the device when it
is next bound (both moves counted in `lazyfuel.profile`'s bytes per direction). A MemoryError
(naming the sizes) only for a block larger than the whole budget, or where the device is full even
after every unpinned block has spilled; blocks pinned by running work may push the store over its
budget for as long as they run. The handles over the slots are `residency.ResidentBlock`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from lazyfuel import profiling
from lazyfuel.backends.vulkan.memory import Allocation, VulkanAllocator
from lazyfuel.backends.vulkan.memtypes import Use
from lazyfuel.backends.vulkan.shared import PerPool, SharedBuffer, buffers_of
from lazyfuel.settings import config

if TYPE_CHECKING:
    from lazyfuel.backends.vulkan.pool import DevicePool


@dataclass(eq=False)
class _Slot:
    """A resident block's bytes: on the device (`allocation`) or spilled to the host (`host`)."""

    nbytes: int
    allocation: Allocation | None = None
    allocator: VulkanAllocator | None = None  # the one `allocation` came from (the pool's, then)
    host: np.ndarray | None = None  # 1-d uint8, while spilled
    shared: SharedBuffer | None = None  # the exportable buffer `allocation` is, where it is one
    pins: int = 0
    freed: bool = False
    spills: int = field(default=0)  # how often it went to the host (tests and explain read it)


class ResidentStore:
    """The resident blocks of one pool, least recently used first; see the module docstring."""

    def __init__(self, pool: DevicePool) -> None:
        self.pool = pool
        self._lock = threading.RLock()
        self._slots: OrderedDict[int, _Slot] = OrderedDict()  # id(slot) -> slot, on the device
        self.device_bytes = 0  # bytes of blocks on the device now
        self._heaps: dict[bool, int] = {}  # `allocator.direct` -> the device heap's bytes (`budget`)

    @property
    def budget(self) -> int:
        """The bytes this pool may keep blocks in: `device_memory_budget` (a fraction of the
        device heap, or bytes)."""
        value = config.device_memory_budget
        if isinstance(value, float):
            return int(value * self._device_heap())
        return int(value)

    def _device_heap(self) -> int:
        """The bytes of the heap device blocks come from, looked up once per allocator mode (the
        budget is asked several times per block: reserve, each pin's release)."""
        allocator = self.pool.allocator
        key = allocator.direct
        found = self._heaps.get(key)
        if found is None:
            found = self._heaps[key] = allocator.heap_bytes(allocator.type_for(Use.DEVICE))
        return found

    @property
    def blocks(self) -> int:
        """How many blocks are on the device now."""
        return len(self._slots)

    def reserve(self, nbytes: int, shared: bool = False) -> _Slot:
        """A new pinned slot of `nbytes` on the device (room made by spilling); in an exportable
        buffer CUDA can import (`shared.SharedBuffers`) with `shared`."""
        slot = _Slot(nbytes, pins=1)
        self._place(slot, shared)
        return slot

    def touch(self, slot: _Slot) -> Allocation:
        """Pin `slot` on the device (bringing it back if spilled) as most recently used; its
        allocation. `release` unpins."""
        with self._lock:
            if slot.freed:
                raise RuntimeError("this resident block was freed")
            slot.pins += 1
            try:
                if slot.allocation is None:
                    host = slot.host
                    self._place(slot)
                    with self.pool.batch() as batch:
                        batch.upload(slot.allocation, host)
                        batch.run()
                    slot.host = None
                    profiling.record(bytes_uploaded=slot.nbytes, device=self.pool.label)
                else:
                    self._slots.move_to_end(id(slot))
            except BaseException:
                slot.pins -= 1
                raise
            assert slot.allocation is not None
            return slot.allocation

    def release(self, slot: _Slot) -> None:
        """One pin fewer, then spill what running work had pushed over the budget (blocks placed
        or brought back while others were pinned), so the store ends under it once they are done."""
        with self._lock:
            slot.pins -= 1
            if self.device_bytes > self.budget:
                self._spill_until(self.budget)

    def settle(self, slot: _Slot) -> None:
        """Unpin a newly written slot (`release`: the store back under its budget)."""
        self.release(slot)

    def read(self, slot: _Slot, out: np.ndarray, at: int = 0) -> bool:
        """Copy the slot's bytes from byte `at` on into `out` (C-contiguous, at most the slot's
        bytes past `at`); whether they came from the device (False: from the spilled host copy,
        no byte over the link)."""
        flat = out.reshape(-1).view(np.uint8)
        with self._lock:
            if slot.allocation is None:
                assert slot.host is not None
                flat[:] = slot.host[at:at + flat.size]
                return False
            allocation = self.touch(slot)
        if at or flat.size != slot.nbytes:
            allocation = allocation.part(at, flat.size)
        try:
            with self.pool.batch() as batch:
                batch.download(allocation, out)
                batch.run()
        finally:
            self.release(slot)
        return True

    def drop(self, slot: _Slot) -> None:
        """Give the slot's device memory back (idempotent; nothing may read it any more)."""
        with self._lock:
            if slot.freed:
                return
            slot.freed = True
            slot.host = None
            if slot.allocation is not None:
                self._slots.pop(id(slot), None)
                self.device_bytes -= slot.nbytes
                self._give_back(slot)

    def _give_back(self, slot: _Slot) -> None:
        """Return the slot's device memory to where it came from (its allocator, or the pool's
        shared buffers) and forget it."""
        if slot.shared is not None:
            buffers_of(self.pool).give(slot.shared)
        elif not self.pool.closed:
            slot.allocator.free(slot.allocation)
        slot.allocation = slot.shared = None

    def _allocate(self, slot: _Slot, shared: bool) -> None:
        if shared:
            slot.shared = buffers_of(self.pool).take(slot.nbytes)
            slot.allocation, slot.allocator = slot.shared.memory.allocation, None
        else:
            slot.allocation = self.pool.allocator.alloc(max(slot.nbytes, 1))
            slot.allocator = self.pool.allocator

    def _place(self, slot: _Slot, shared: bool = False) -> None:
        """Give `slot` (pinned) device memory, spilling others first to stay under the budget."""
        with self._lock:
            largest = self.pool.info.max_memory_allocation_size
            if slot.nbytes > largest:  # no spilling makes room for one buffer past the device's limit
                raise MemoryError(
                    f"a resident block of {slot.nbytes} bytes is larger than the largest allocation "
                    f"{self.pool.label} makes (maxMemoryAllocationSize {largest} bytes); use smaller "
                    "chunks (compute(device=True) puts the whole result in one allocation: "
                    "persist(device=True) keeps it block by block)")
            budget = self.budget
            if slot.nbytes > budget:
                raise MemoryError(
                    f"a resident block of {slot.nbytes} bytes is larger than the device memory "
                    f"budget of {budget} bytes on {self.pool.label} (lazyfuel.config."
                    f"device_memory_budget={config.device_memory_budget!r}); raise the budget or use "
                    "smaller chunks")
            self._spill_until(budget - slot.nbytes)
            try:
                self._allocate(slot, shared)
            except MemoryError as err:  # the device is fuller than the budget thought: spill all
                if not self._spill_until(0):
                    raise MemoryError(
                        f"no device memory for a resident block of {slot.nbytes} bytes on "
                        f"{self.pool.label}, with {self.device_bytes} bytes of blocks held there "
                        f"by running work (none could spill): {err}") from err
                self._allocate(slot, shared)
            self._slots[id(slot)] = slot
            self.device_bytes += slot.nbytes

    def _spill_until(self, limit: int) -> int:
        """Spill unpinned blocks, least recently used first, until at most `limit` bytes are on
        the device (or none is left to spill); how many spilled."""
        if self.device_bytes <= limit:  # under it already: no walk over every held block
            return 0
        spilled = 0
        for slot in list(self._slots.values()):
            if self.device_bytes <= limit:
                break
            if slot.pins:
                continue
            self._spill(slot)
            spilled += 1
        return spilled

    def _spill(self, slot: _Slot) -> None:
        allocation = slot.allocation
        assert allocation is not None
        host = np.empty(slot.nbytes, np.uint8)
        with self.pool.batch() as batch:
            batch.download(allocation, host)
            batch.run()
        self._give_back(slot)  # it comes back in ordinary memory
        profiling.record(bytes_downloaded=slot.nbytes, device=self.pool.label)
        slot.host = host
        slot.spills += 1
        self._slots.pop(id(slot))
        self.device_bytes -= slot.nbytes


_STORES = PerPool(ResidentStore)


def store_of(pool: DevicePool) -> ResidentStore:
    """The pool's store (made on first use)."""
    return _STORES.for_pool(pool)
