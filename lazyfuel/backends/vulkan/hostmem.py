"""Importing host arrays' pages as Vulkan memory (VK_EXT_external_memory_host).

`HostImports.open(device, physical)` is None unless the device was created with the extension
(its entry point resolves). `import_range(address, nbytes, base_usage)` imports the pages
covering `nbytes` at `address` (the range rounded out to minImportedHostPointerAlignment, 4096 on
lavapipe and NVIDIA) and binds one VkBuffer over them; it returns an `Imported` whose `offset`
is where `address` lies in that buffer, or None where the driver will not import the range (then
the caller stages), among them a range larger than the heap of every memory type it could be
imported as, or than maxMemoryAllocationSize (the spec forbids the allocation: issue 16 case 9),
which is refused before any Vulkan call. Every page touching the range belongs to the process,
so rounding out is safe; the device only reads or writes the bytes the caller records work on.

The caller keeps the array alive (and unmoved) until every command buffer using the import has
finished, then calls `release`: freeing the memory unpins the pages on a discrete GPU.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import vulkan as vk

from lazyfuel.backends.vulkan.check import VulkanError, check

_HOST_ALLOCATION = vk.VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT
EXTENSION = "VK_EXT_external_memory_host"
_MEMORY_ALLOCATE_DEVICE_ADDRESS = 0x2
_STYPE_MEMORY_ALLOCATE_FLAGS_INFO = 1000060000
_STYPE_BUFFER_DEVICE_ADDRESS_INFO = 1000244001


@dataclass(eq=False)
class Imported:
    """An imported page range: `buffer` covers `size` bytes from `base`; the array's first byte is
    at `offset` in it; `address` is the buffer's device address."""

    memory: Any
    buffer: Any
    address: int
    size: int
    offset: int
    memory_type: int = -1  # the memory type index it was imported as


def alignment(physical: Any) -> int:
    """minImportedHostPointerAlignment of a physical device (0 when it lacks the extension)."""
    ffi = vk.ffi
    ext = ffi.new("VkPhysicalDeviceExternalMemoryHostPropertiesEXT*", {
        "sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT})
    props2 = ffi.new("VkPhysicalDeviceProperties2*",
                     {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, "pNext": ext})
    vk.lib.vkGetPhysicalDeviceProperties2(physical, props2)
    return int(ext.minImportedHostPointerAlignment)


class HostImports:
    """Imports host page ranges on one VkDevice; thread-safe (its one mutable field, `live`, the
    imports not yet released, changes under a lock)."""

    def __init__(self, device: Any, page: int, properties_fn: Any, heaps: tuple[int, ...] = (),
                 max_allocation: int = 0) -> None:
        """`heaps[t]`: the size of the heap memory type t comes from; `max_allocation`: the device's
        maxMemoryAllocationSize (0: none). No import is asked for past either."""
        self.device, self.page, self._properties = device, page, properties_fn
        self.heaps, self.max_allocation = heaps, max_allocation
        self.live = 0
        self._lock = threading.Lock()
        ffi = vk.ffi
        self._flags_info = ffi.new("VkMemoryAllocateFlagsInfo*", {
            "sType": _STYPE_MEMORY_ALLOCATE_FLAGS_INFO, "flags": _MEMORY_ALLOCATE_DEVICE_ADDRESS})
        self._external = ffi.new("VkExternalMemoryBufferCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
            "handleTypes": _HOST_ALLOCATION})

    @classmethod
    def open(cls, device: Any, physical: Any, heaps: tuple[int, ...] = (),
             max_allocation: int = 0) -> HostImports | None:
        """The importer for `device`, or None where the extension is not enabled on it; `heaps`
        and `max_allocation` as for the constructor."""
        pointer = vk.lib.vkGetDeviceProcAddr(device, b"vkGetMemoryHostPointerPropertiesEXT")
        page = alignment(physical)
        if pointer == vk.ffi.NULL or page <= 0:
            return None
        return cls(device, page, vk.ffi.cast("PFN_vkGetMemoryHostPointerPropertiesEXT", pointer), heaps,
                   max_allocation)

    def fits(self, size: int, type_index: int) -> bool:
        """Whether `size` bytes may be allocated from memory type `type_index`: within its heap
        (VUID-vkAllocateMemory-pAllocateInfo-01713) and maxMemoryAllocationSize."""
        heap = self.heaps[type_index] if type_index < len(self.heaps) else size
        return size <= heap and (not self.max_allocation or size <= self.max_allocation)

    def import_range(self, address: int, nbytes: int, usage: int) -> Imported | None:
        """Import the pages covering `nbytes` at `address` as one buffer of `usage`; None when the
        driver refuses (a file-backed or read-only mapping on some drivers, no fitting type)."""
        ffi, lib, device = vk.ffi, vk.lib, self.device
        base = address - address % self.page
        size = -(-(address + nbytes - base) // self.page) * self.page
        if self.max_allocation and size > self.max_allocation:  # no driver gives it; copy instead
            return None
        pointer = ffi.cast("void*", base)
        props = ffi.new("VkMemoryHostPointerPropertiesEXT*", {
            "sType": vk.VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT})
        if self._properties(device, _HOST_ALLOCATION, pointer, props) != 0 or not props.memoryTypeBits:
            return None
        binfo = ffi.new("VkBufferCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, "pNext": self._external, "size": size,
            "usage": usage, "sharingMode": vk.VK_SHARING_MODE_EXCLUSIVE})
        pbuf = ffi.new("VkBuffer*")
        check(lib.vkCreateBuffer(device, binfo, ffi.NULL, pbuf), "vkCreateBuffer", "imported host memory")
        req = ffi.new("VkMemoryRequirements*")
        lib.vkGetBufferMemoryRequirements(device, pbuf[0], req)
        types = props.memoryTypeBits & req.memoryTypeBits
        fitting = [t for t in range(types.bit_length()) if types >> t & 1 and self.fits(size, t)]
        if not fitting or req.size > size or req.alignment > self.page:  # the spec forbids asking
            lib.vkDestroyBuffer(device, pbuf[0], ffi.NULL)
            return None
        host = ffi.new("VkImportMemoryHostPointerInfoEXT*", {
            "sType": vk.VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT, "pNext": self._flags_info,
            "handleType": _HOST_ALLOCATION, "pHostPointer": pointer})
        ainfo = ffi.new("VkMemoryAllocateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, "pNext": host, "allocationSize": size,
            "memoryTypeIndex": fitting[0]})
        pmem = ffi.new("VkDeviceMemory*")
        if lib.vkAllocateMemory(device, ainfo, ffi.NULL, pmem) != 0:
            lib.vkDestroyBuffer(device, pbuf[0], ffi.NULL)
            return None
        try:
            check(lib.vkBindBufferMemory(device, pbuf[0], pmem[0], 0), "vkBindBufferMemory",
                  "imported host memory")
        except VulkanError:
            lib.vkDestroyBuffer(device, pbuf[0], ffi.NULL)
            lib.vkFreeMemory(device, pmem[0], ffi.NULL)
            raise
        dinfo = ffi.new("VkBufferDeviceAddressInfo*", {"sType": _STYPE_BUFFER_DEVICE_ADDRESS_INFO,
                                                      "buffer": pbuf[0]})
        with self._lock:
            self.live += 1
        return Imported(pmem[0], pbuf[0], int(lib.vkGetBufferDeviceAddress(device, dinfo)), size,
                        address - base, fitting[0])

    def release(self, imported: Imported) -> None:
        """Destroy the buffer and free the memory (no work using them may be in flight)."""
        vk.lib.vkDestroyBuffer(self.device, imported.buffer, vk.ffi.NULL)
        vk.lib.vkFreeMemory(self.device, imported.memory, vk.ffi.NULL)
        with self._lock:
            self.live -= 1
