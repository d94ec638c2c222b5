"""Device memory: large blocks, sub-allocated by size class and reused.

Every block is one VkDeviceMemory bound to one VkBuffer (storage + transfer + device address),
so an `Allocation` is (block, offset, size): kernels bind (buffer, offset, range) as a storage
buffer or reach it by device address (the block's plus the offset), and no per-allocation Vulkan
object is made. Sizes round up to a size class (four per octave, at least 256 bytes, a multiple
of 16 and of minStorageBufferOffsetAlignment), so every offset is aligned for a binding. Freed
allocations go to a free list per class and are handed out again; allocations over a quarter of
a block get a block of their own, kept for reuse up to `cache_limit` bytes.

Where device-local memory is host-visible (lavapipe, integrated GPUs, ReBAR) device allocations
are mapped and `Allocation.host` is a numpy view of them: uploads and downloads are plain memory
copies. Elsewhere device allocations have `host = None` and the batch stages through
`alloc(…, staging=True)` allocations from a host-visible type.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import vulkan as vk

from lazyfuel.backends.vulkan.check import VulkanMemoryError, check
from lazyfuel.backends.vulkan.devices import DeviceInfo

# Vulkan 1.2 names whose values the `vulkan` package leaves as None.
BUFFER_USAGE_SHADER_DEVICE_ADDRESS = 0x00020000
MEMORY_ALLOCATE_DEVICE_ADDRESS = 0x00000002
_STYPE_MEMORY_ALLOCATE_FLAGS_INFO = 1000060000
_STYPE_BUFFER_DEVICE_ADDRESS_INFO = 1000244001

BUFFER_USAGE = (vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
                | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT | BUFFER_USAGE_SHADER_DEVICE_ADDRESS)
_LOCAL = vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
_VISIBLE = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
_CACHED = vk.VK_MEMORY_PROPERTY_HOST_CACHED_BIT

MIN_CLASS = 256
ALIGN = 16


def size_class(nbytes: int, align: int = ALIGN) -> int:
    """The size an allocation of `nbytes` really gets: >= 256, four classes per octave, a multiple
    of `align` (so that every offset in a block stays aligned)."""
    if nbytes <= MIN_CLASS:
        size = MIN_CLASS
    else:
        top = 1 << (int(nbytes - 1).bit_length() - 1)  # the power of two just below
        step = top // 4
        size = top + -(-(nbytes - top) // step) * step
    return -(-size // align) * align


@dataclass(eq=False)
class Block:
    """One VkDeviceMemory with one VkBuffer over all of it."""

    memory: Any
    buffer: Any
    address: int
    size: int
    host: np.ndarray | None  # mapped bytes, when host-visible
    staging: bool
    dedicated: bool
    used: int = 0  # bump pointer for sub-allocation


@dataclass(eq=False)
class Allocation:
    """`size` bytes at `offset` in `block`; `address` is its device address."""

    block: Block
    offset: int
    size: int
    address: int
    host: np.ndarray | None  # a uint8 view of the bytes when host-visible

    @property
    def buffer(self) -> Any:
        """The VkBuffer to use with `offset` for transfers."""
        return self.block.buffer


class VulkanAllocator:
    """Sub-allocates device (and staging) memory for one VkDevice; thread-safe."""

    def __init__(self, device: Any, physical: Any, info: DeviceInfo,
                 block_size: int = 64 << 20, cache_limit: int = 512 << 20) -> None:
        self.device, self.info = device, info
        self.block_size = min(block_size, info.max_memory_allocation_size)
        self.cache_limit = cache_limit
        mem = vk.ffi.new("VkPhysicalDeviceMemoryProperties*")
        vk.lib.vkGetPhysicalDeviceMemoryProperties(physical, mem)
        self._type_flags = [int(mem.memoryTypes[i].propertyFlags) for i in range(mem.memoryTypeCount)]
        self.direct = info.host_visible_device_memory
        # storage-buffer bindings need offsets aligned to minStorageBufferOffsetAlignment
        self.align = max(ALIGN, info.min_storage_buffer_offset_alignment)
        self._lock = threading.Lock()
        self._blocks: list[Block] = []
        self._current: dict[bool, Block | None] = {False: None, True: None}
        self._free: dict[tuple[bool, int], list[Allocation]] = {}
        self._cached_dedicated = 0
        self.in_use = 0
        # Debugging aid for tests: when set, every host-visible allocation is filled with this byte
        # before it is handed out, so an element a kernel forgets to write shows up.
        self.poison: int | None = None
        # pre-built structs for block creation
        self._flags_info = vk.ffi.new("VkMemoryAllocateFlagsInfo*", {
            "sType": _STYPE_MEMORY_ALLOCATE_FLAGS_INFO, "flags": MEMORY_ALLOCATE_DEVICE_ADDRESS})

    # -- public ---------------------------------------------------------------------------------
    def alloc(self, nbytes: int, staging: bool = False) -> Allocation:
        """At least `nbytes` (rounded to a size class) of device memory, or of host-visible staging
        memory with `staging`. Raises VulkanMemoryError saying what was asked and what is in use."""
        size = size_class(max(int(nbytes), 1), self.align)
        staging = staging and not self.direct
        if size > self.info.max_memory_allocation_size:
            raise VulkanMemoryError("vkAllocateMemory", -2, f"asked for {nbytes} bytes in one buffer; the "
                                    f"device allows at most {self.info.max_memory_allocation_size}")
        with self._lock:
            free = self._free.get((staging, size))
            if free:
                found = free.pop()
                if found.block.dedicated:
                    self._cached_dedicated -= size
            elif size > self.block_size // 4:
                found = self._whole(self._new_block(size, staging, dedicated=True))
            else:
                found = self._bump(size, staging)
            self.in_use += size
        if self.poison is not None and found.host is not None:
            found.host[:] = self.poison
        return found

    def free(self, allocation: Allocation) -> None:
        """Return `allocation` for reuse (the caller's work using it must have finished)."""
        with self._lock:
            self.in_use -= allocation.size
            block = allocation.block
            if block.dedicated:
                if self._cached_dedicated + allocation.size > self.cache_limit:
                    self._destroy_block(block)
                    return
                self._cached_dedicated += allocation.size
            self._free.setdefault((block.staging, allocation.size), []).append(allocation)

    def trim(self) -> int:
        """Destroy cached free dedicated blocks; return the bytes released."""
        with self._lock:
            return self._trim_locked()

    @property
    def reserved(self) -> int:
        """Bytes of device memory held in blocks."""
        return sum(b.size for b in self._blocks)

    def destroy(self) -> None:
        """Free every block (all work using them must have finished)."""
        with self._lock:
            for block in list(self._blocks):
                self._destroy_block(block)
            self._free.clear()
            self._current = {False: None, True: None}

    # -- blocks ---------------------------------------------------------------------------------
    def _whole(self, block: Block) -> Allocation:
        block.used = block.size
        return Allocation(block, 0, block.size, block.address, block.host)

    def _bump(self, size: int, staging: bool) -> Allocation:
        block = self._current[staging]
        if block is None or block.used + size > block.size:
            block = self._current[staging] = self._new_block(self.block_size, staging, dedicated=False)
        offset = block.used
        block.used += size
        host = None if block.host is None else block.host[offset:offset + size]
        return Allocation(block, offset, size, block.address + offset, host)

    def _memory_type(self, allowed: int, staging: bool) -> int:
        if staging:
            prefs = [_VISIBLE | _CACHED, _VISIBLE]
        else:
            prefs = [_LOCAL | _VISIBLE, _LOCAL] if self.direct else [_LOCAL]
        for want in prefs:
            for i, flags in enumerate(self._type_flags):
                if allowed & (1 << i) and flags & want == want:
                    return i
        raise RuntimeError(f"no memory type for {'staging' if staging else 'device'} buffers "
                           f"(allowed types {allowed:#x})")

    def _new_block(self, size: int, staging: bool, dedicated: bool) -> Block:
        try:
            return self._create_block(size, staging, dedicated)
        except VulkanMemoryError:
            if not self._trim_locked():
                raise
            return self._create_block(size, staging, dedicated)

    def _create_block(self, size: int, staging: bool, dedicated: bool) -> Block:
        ffi, lib, device = vk.ffi, vk.lib, self.device
        binfo = ffi.new("VkBufferCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, "size": size, "usage": BUFFER_USAGE,
            "sharingMode": vk.VK_SHARING_MODE_EXCLUSIVE})
        pbuf = ffi.new("VkBuffer*")
        check(lib.vkCreateBuffer(device, binfo, ffi.NULL, pbuf), "vkCreateBuffer")
        req = ffi.new("VkMemoryRequirements*")
        lib.vkGetBufferMemoryRequirements(device, pbuf[0], req)
        ainfo = ffi.new("VkMemoryAllocateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, "pNext": self._flags_info,
            "allocationSize": req.size, "memoryTypeIndex": self._memory_type(req.memoryTypeBits, staging)})
        pmem = ffi.new("VkDeviceMemory*")
        result = lib.vkAllocateMemory(device, ainfo, ffi.NULL, pmem)
        if result != 0:
            lib.vkDestroyBuffer(device, pbuf[0], ffi.NULL)
            heap = self.info.device_local_bytes
            check(result, "vkAllocateMemory", f"asked for {size} bytes; {self.in_use} in use, "
                  f"{self.reserved} reserved, device-local heap {heap}")
        check(lib.vkBindBufferMemory(device, pbuf[0], pmem[0], 0), "vkBindBufferMemory")
        host = None
        if staging or self.direct:
            pdata = ffi.new("void**")
            check(lib.vkMapMemory(device, pmem[0], 0, size, 0, pdata), "vkMapMemory")
            host = np.frombuffer(ffi.buffer(pdata[0], size), np.uint8)
        ainfo_addr = ffi.new("VkBufferDeviceAddressInfo*", {
            "sType": _STYPE_BUFFER_DEVICE_ADDRESS_INFO, "buffer": pbuf[0]})
        address = int(lib.vkGetBufferDeviceAddress(device, ainfo_addr))
        block = Block(pmem[0], pbuf[0], address, size, host, staging, dedicated)
        self._blocks.append(block)
        return block

    def _trim_locked(self) -> int:
        released = 0
        for key, allocs in list(self._free.items()):
            keep = []
            for a in allocs:
                if a.block.dedicated:
                    released += a.size
                    self._destroy_block(a.block)
                else:
                    keep.append(a)
            self._free[key] = keep
        self._cached_dedicated = 0
        return released

    def _destroy_block(self, block: Block) -> None:
        lib, ffi = vk.lib, vk.ffi
        block.host = None
        lib.vkDestroyBuffer(self.device, block.buffer, ffi.NULL)
        lib.vkFreeMemory(self.device, block.memory, ffi.NULL)  # unmaps implicitly
        self._blocks.remove(block)
        for staging, current in self._current.items():
            if current is block:
                self._current[staging] = None
