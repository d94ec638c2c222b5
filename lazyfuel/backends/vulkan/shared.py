"""Device memory shared with CUDA on the same GPU: how a pool hands results over, and the buffers.

`hand_off(pool)` says how a `DeviceArray` on `pool` reaches other libraries (a `HandOff`):
- `host`: the pool's device memory is host-visible and mapped (lavapipe, integrated GPUs,
  `allocator.direct`): a CPU DLPack over the mapped memory, whatever else the machine has;
- `cuda`: device-local memory, the device can export it (VK_KHR_external_memory_fd) and a CUDA
  device has the pool's deviceUUID: the memory is allocated exportable and imported by CUDA
  (`__cuda_array_interface__`, a kDLCUDA DLPack);
- `none`: neither (a discrete GPU with no CUDA, or no cuda-python): host copies only; `why` says
  what is missing.
`choose` is the rule itself (testable without the hardware); `hand_off` asks the device, and for
CUDA's device number the CUDA runtime (whose start costs ~110-155 ms on the H200): only a consumer
asks it (`DeviceArray.hand_off`: `__dlpack__`, `__cuda_array_interface__`, torch, CuPy).

`cuda_may_import(pool)` is what a compute asks instead, whether its result goes into exportable
memory: `may_import` of what the device itself says (host-visible memory, the export extension,
an NVIDIA vendorID) and whether CUDA could be here at all (cuda-python findable), none of which
starts CUDA: a compute never starts the CUDA runtime, so a
process that forks after computing still may use CUDA in its children. Where it says yes and the
runtime then finds no CUDA device with the pool's UUID (CUDA_VISIBLE_DEVICES hiding it, say), the
result is in exportable memory CUDA does not share, and its `hand_off` says so (`none` and why).

`buffers_of(pool)` is the pool's `SharedBuffers`: exportable dedicated allocations
(`export.ExportedMemory`), each with CUDA's import of it made once, on first use
(`SharedBuffer.cuda_pointer`), and kept with it. A freed buffer is kept for reuse by the next of its
size class (up to the allocator's `cache_limit` bytes, oldest dropped first), import included:
making device memory costs ~22 ms per GiB on the H200's driver, importing it more, and a
`compute(device=True)` in a loop would pay both every time.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Generic, TypeVar

from lazyfuel.backends.vkfft.external import ExternalBuffer, cuda_device_with_uuid
from lazyfuel.backends.vulkan.check import VulkanMemoryError
from lazyfuel.backends.vulkan.export import EXTENSION, ExportedMemory, device_uuid, supported, vendor_id
from lazyfuel.backends.vulkan.memory import size_class

if TYPE_CHECKING:
    from lazyfuel.backends.vulkan.pool import DevicePool

HOST, CUDA, NONE = "host", "cuda", "none"
NVIDIA_VENDOR = 0x10DE  # VkPhysicalDeviceProperties.vendorID of NVIDIA's GPUs (PCI vendor id)
_T = TypeVar("_T")


@dataclass(frozen=True)
class HandOff:
    """How a pool's results reach other libraries: `kind` (HOST, CUDA or NONE), the CUDA device
    number for CUDA, and `why`."""

    kind: str
    cuda_device: int | None
    why: str


def choose(host_visible: bool, exportable: bool | str, cuda: int | str) -> HandOff:
    """The hand-off for a pool whose device memory is (or is not) `host_visible`, that can export
    memory (True, or why not) and whose GPU is CUDA device `cuda` (or why none is)."""
    if host_visible:
        return HandOff(HOST, None, "device memory is host-visible: a CPU DLPack over it")
    if isinstance(exportable, str):
        return HandOff(NONE, None, exportable)
    if isinstance(cuda, str):
        return HandOff(NONE, None, cuda)
    return HandOff(CUDA, cuda, f"the same GPU is CUDA device {cuda}: exported memory imported by CUDA")


def hand_off(pool: DevicePool) -> HandOff:
    """`choose` for `pool` (asks CUDA only for device-local memory that can be exported). What
    the device says of itself is asked once per pool (`_DeviceFacts`), and each answer is one
    HandOff made once (`_chosen`): a DeviceArray asks this on its first hand-off, on W4's path,
    where each of these microseconds runs cold right after the compute."""
    host_visible = pool.allocator.direct
    facts = _FACTS.for_pool(pool)
    exportable: bool | str = facts.exportable or f"{pool.label} cannot export memory (no {EXTENSION})"
    cuda: int | str = "not asked"
    if not host_visible and exportable is True:
        cuda = cuda_device_with_uuid(facts.uuid)
    return _chosen(host_visible, exportable, cuda)


@dataclass(frozen=True)
class _DeviceFacts:
    """What a pool's device says of itself and never changes: whether it exports memory
    (`export.supported`) and its deviceUUID, each a Vulkan call (`hand_off`)."""

    pool: DevicePool
    exportable: bool
    uuid: bytes

    @classmethod
    def of(cls, pool: DevicePool) -> _DeviceFacts:
        return cls(pool, supported(pool), device_uuid(pool.physical))


_chosen = cache(choose)  # HandOffs are frozen, and the answers few (a pool's, a CUDA device's)


def may_import(host_visible: bool, exportable: bool, vendor_id: int, cuda_findable: bool) -> bool:
    """Whether CUDA may import a pool's results, decided without CUDA: device-local memory
    (not `host_visible`) the device can export, on an NVIDIA GPU (`vendor_id`), with cuda-python
    `cuda_findable`. True does not promise CUDA shares the GPU (`hand_off` asks the runtime that)."""
    return not host_visible and exportable and vendor_id == NVIDIA_VENDOR and cuda_findable


def cuda_may_import(pool: DevicePool) -> bool:
    """`may_import` for `pool`: whether a compute's result goes into exportable memory (never
    starts the CUDA runtime)."""
    if pool.allocator.direct or not _FACTS.for_pool(pool).exportable:
        return False
    return may_import(False, True, vendor_id(pool.physical), _cuda_findable())


@cache
def _cuda_findable() -> bool:
    """Whether cuda-python's `cuda.bindings` can be imported (looked up, not imported; once a
    process)."""
    try:
        return importlib.util.find_spec("cuda.bindings") is not None
    except (ImportError, ValueError):  # no `cuda` package at all, or a broken one
        return False


@dataclass(eq=False)
class SharedBuffer:
    """One exportable allocation (`memory`) and CUDA's mapping of it, made on first use."""

    memory: ExportedMemory
    key: int  # the size class it is kept under
    mapping: ExternalBuffer | None = None

    def cuda_pointer(self, device: int) -> int:
        """The memory's CUDA device pointer on CUDA device `device` (imported the first time)."""
        if self.mapping is None:
            fd = self.memory.fd()
            try:
                self.mapping = ExternalBuffer.import_fd(fd, self.memory.size, device)
            except BaseException:
                os.close(fd)
                raise
        return self.mapping.pointer

    def close(self) -> None:
        """CUDA's mapping closed, then the Vulkan memory freed (nothing may use either)."""
        if self.mapping is not None:
            self.mapping.close()
            self.mapping = None
        self.memory.free()


class SharedBuffers:
    """A pool's exportable buffers and the freed ones kept for reuse; thread-safe."""

    def __init__(self, pool: DevicePool) -> None:
        self.pool = pool
        self._lock = threading.Lock()
        self._free: OrderedDict[int, SharedBuffer] = OrderedDict()  # id -> buffer, oldest first
        self.made = 0  # buffers allocated (tests read it: reuse makes none)

    @property
    def cached_bytes(self) -> int:
        """Bytes of freed buffers kept for reuse."""
        return sum(b.memory.size for b in self._free.values())

    def take(self, nbytes: int) -> SharedBuffer:
        """A buffer of at least `nbytes`: a kept one of the same size class, else a new one
        (the kept ones freed first if the device is full). VulkanMemoryError when it is full."""
        key = size_class(max(nbytes, 1), self.pool.allocator.align)
        with self._lock:
            for ident, buffer in self._free.items():
                if buffer.key == key:
                    del self._free[ident]
                    return buffer
        try:
            memory = ExportedMemory.allocate(self.pool, key)
        except VulkanMemoryError:
            if not self.trim():
                raise
            memory = ExportedMemory.allocate(self.pool, key)
        self.made += 1
        return SharedBuffer(memory, key)

    def give(self, buffer: SharedBuffer) -> None:
        """Keep `buffer` for reuse (no work may still use it), dropping the oldest kept ones past
        the allocator's cache_limit; closed at once once the pool is."""
        if self.pool.closed:
            buffer.close()
            return
        limit = self.pool.allocator.cache_limit
        with self._lock:
            self._free[id(buffer)] = buffer
            dropped = []
            while self._free and self.cached_bytes > limit:
                dropped.append(self._free.popitem(last=False)[1])
        for old in dropped:
            old.close()

    def trim(self) -> int:
        """Close every kept buffer; the bytes released."""
        with self._lock:
            kept, self._free = list(self._free.values()), OrderedDict()
        for buffer in kept:
            buffer.close()
        return sum(b.memory.size for b in kept)


class PerPool(Generic[_T]):
    """One `make(pool)` per pool, made on first use (a pool's id reused by a new pool gets a new
    one); thread-safe. `for_pool(pool)` finds it."""

    def __init__(self, make: Callable[[DevicePool], _T]) -> None:
        self._make, self._lock = make, threading.Lock()
        self._made: dict[int, _T] = {}

    def values(self) -> list[_T]:
        """Every one made so far (tests sum the stores' bytes)."""
        with self._lock:
            return list(self._made.values())

    def for_pool(self, pool: DevicePool) -> _T:
        with self._lock:
            found = self._made.get(id(pool))
            if found is None or found.pool is not pool:  # type: ignore[attr-defined]
                found = self._made[id(pool)] = self._make(pool)
            return found


_BUFFERS = PerPool(SharedBuffers)
_FACTS = PerPool(_DeviceFacts.of)


def buffers_of(pool: DevicePool) -> SharedBuffers:
    """The pool's shared buffers (made on first use)."""
    return _BUFFERS.for_pool(pool)
