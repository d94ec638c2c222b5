"""Device memory another API can take: exported as an opaque POSIX fd (VK_KHR_external_memory_fd).

A result that crosses to another device API on the same GPU (the Cuda FFT provider) need not come
back to the host: `ExportedMemory.allocate(pool, nbytes)` makes one dedicated VkDeviceMemory
(VkExportMemoryAllocateInfo, handle type OPAQUE_FD) bound to a VkBuffer of the pool's usual usage,
so the kernels write it like any allocation (`allocation`), and `fd()` hands out a new file
descriptor for it that the importer owns (CUDA's cudaImportExternalMemory takes it over). The
memory lives until `free()`, which the owner calls once every importer has released its mapping:
the exported pages stay valid while either side holds them, but the VkDeviceMemory handle must
not outlive its pool.

`import_fd(pool, fd, size)` is the other direction on Vulkan (VkImportMemoryFdInfoKHR): another
VkDevice of the same physical device maps the same pages. `device_uuid(physical)` is the GPU's
VkPhysicalDeviceIDProperties.deviceUUID, which CUDA reports for the same GPU.

Everything here needs the extension enabled on the pool's device (`supported(pool)`); lavapipe and
NVIDIA's driver list it. No code here runs on the per-dispatch path.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import vulkan as vk

from lazyfuel.backends.vulkan.check import check
from lazyfuel.backends.vulkan.memory import BUFFER_USAGE, Allocation, Block
from lazyfuel.backends.vulkan.memtypes import Use, memory_type

if TYPE_CHECKING:
    from lazyfuel.backends.vulkan.pool import DevicePool

EXTENSION = "VK_KHR_external_memory_fd"
OPAQUE_FD = vk.VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT
_MEMORY_ALLOCATE_DEVICE_ADDRESS = 0x2
_STYPE_MEMORY_ALLOCATE_FLAGS_INFO = 1000060000
_STYPE_BUFFER_DEVICE_ADDRESS_INFO = 1000244001


def device_uuid(physical: Any) -> bytes:
    """The 16-byte deviceUUID of a physical device (the same bytes CUDA reports for that GPU)."""
    ffi = vk.ffi
    ids = ffi.new("VkPhysicalDeviceIDProperties*", {
        "sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES})
    props = ffi.new("VkPhysicalDeviceProperties2*", {
        "sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, "pNext": ids})
    vk.lib.vkGetPhysicalDeviceProperties2(physical, props)
    return bytes(ffi.buffer(ids.deviceUUID, 16))


def vendor_id(physical: Any) -> int:
    """The physical device's vendorID (its PCI vendor id: 0x10DE for NVIDIA)."""
    props = vk.ffi.new("VkPhysicalDeviceProperties*")
    vk.lib.vkGetPhysicalDeviceProperties(physical, props)
    return int(props.vendorID)


def supported(pool: DevicePool) -> bool:
    """Whether `pool`'s device was created with VK_KHR_external_memory_fd (its entry point resolves)."""
    return _proc(pool, "vkGetMemoryFdKHR") is not None


def _proc(pool: DevicePool, name: str) -> Any:
    pointer = vk.lib.vkGetDeviceProcAddr(pool.device, name.encode())
    return None if pointer == vk.ffi.NULL else vk.ffi.cast(f"PFN_{name}", pointer)


@dataclass(eq=False)
class ExportedMemory:
    """One exportable dedicated allocation on `pool`: `allocation` for the kernels, `size` bytes
    (the driver's size, which an importer must be told), `fd()` for other APIs, `download(out)` to
    read it back, `free()` at the end: a `backends.base.ExportedResult`."""

    pool: DevicePool
    allocation: Allocation
    size: int
    freed: bool = False

    @classmethod
    def allocate(cls, pool: DevicePool, nbytes: int) -> ExportedMemory:
        """`nbytes` of exportable device memory on `pool` (mapped where the pool maps device
        memory). RuntimeError where the device cannot export; VulkanMemoryError when it is full."""
        if not supported(pool):
            raise RuntimeError(f"{pool.label} cannot export memory: {EXTENSION} is not enabled on it")
        ffi, lib, device = vk.ffi, vk.lib, pool.device
        pbuf, req, type_index = _external_buffer(pool, max(nbytes, 16), "exportable memory")
        mapped = pool.allocator.direct
        chain = _allocate_chain(pbuf[0], OPAQUE_FD)
        ainfo = ffi.new("VkMemoryAllocateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, "pNext": chain[0],
            "allocationSize": req.size, "memoryTypeIndex": type_index})
        memory = _allocate(pool, ainfo, pbuf[0], "exportable memory")
        host = None
        if mapped:
            pdata = ffi.new("void**")
            check(lib.vkMapMemory(device, memory, 0, req.size, 0, pdata), "vkMapMemory", "exportable memory")
            host = np.frombuffer(ffi.buffer(pdata[0], req.size), np.uint8)
        address = _address(device, pbuf[0])
        block = Block(memory, pbuf[0], address, int(req.size), host, Use.DEVICE, True,
                      used=int(req.size), memory_type=type_index)
        return cls(pool, Allocation(block, 0, int(req.size), address, host), int(req.size))

    def fd(self) -> int:
        """A new POSIX file descriptor for this memory; the caller owns it (an importer that
        succeeds takes it over; close it otherwise)."""
        get_fd = _proc(self.pool, "vkGetMemoryFdKHR")
        info = vk.ffi.new("VkMemoryGetFdInfoKHR*", {
            "sType": vk.VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR,
            "memory": self.allocation.block.memory, "handleType": OPAQUE_FD})
        out = vk.ffi.new("int*")
        check(get_fd(self.pool.device, info, out), "vkGetMemoryFdKHR")
        return int(out[0])

    def download(self, out: np.ndarray) -> None:
        """Copy the memory's first `out.nbytes` bytes into `out` (C-contiguous) through one batch
        of the pool, and wait for it."""
        with self.pool.batch() as batch:
            batch.download(self.allocation, out)
            batch.run()

    def free(self) -> None:
        """Destroy the buffer and free the memory (idempotent; no work using it may be in flight;
        a no-op once the pool is closed: its device goes, and the memory with it)."""
        if self.freed:
            return
        self.freed = True
        if self.pool.closed:
            return
        block = self.allocation.block
        block.host = None
        vk.lib.vkDestroyBuffer(self.pool.device, block.buffer, vk.ffi.NULL)
        vk.lib.vkFreeMemory(self.pool.device, block.memory, vk.ffi.NULL)


def _external_buffer(pool: DevicePool, size: int, what: str) -> tuple[Any, Any, int]:
    """A buffer of `size` bytes that OPAQUE_FD memory can back, its memory requirements, and the
    memory type (device memory, mapped where the pool maps device memory) to allocate it from."""
    ffi, lib = vk.ffi, vk.lib
    external = ffi.new("VkExternalMemoryBufferCreateInfo*", {
        "sType": vk.VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO, "handleTypes": OPAQUE_FD})
    binfo = ffi.new("VkBufferCreateInfo*", {
        "sType": vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, "pNext": external, "size": size,
        "usage": BUFFER_USAGE, "sharingMode": vk.VK_SHARING_MODE_EXCLUSIVE})
    pbuf = ffi.new("VkBuffer*")
    check(lib.vkCreateBuffer(pool.device, binfo, ffi.NULL, pbuf), "vkCreateBuffer", what)
    req = ffi.new("VkMemoryRequirements*")
    lib.vkGetBufferMemoryRequirements(pool.device, pbuf[0], req)
    flags = _type_flags(pool.physical)
    return pbuf, req, memory_type(flags, req.memoryTypeBits, Use.DEVICE, pool.allocator.direct)


def import_fd(pool: DevicePool, fd: int, size: int) -> ExportedMemory:
    """The memory `fd` (OPAQUE_FD, `size` bytes as exported) as an allocation on `pool`, which
    takes the fd over on success (on failure the caller still owns it). `free()` releases it.
    RuntimeError where `pool`'s device cannot import."""
    if not supported(pool):
        raise RuntimeError(f"{pool.label} cannot import memory: {EXTENSION} is not enabled on it")
    ffi, lib, device = vk.ffi, vk.lib, pool.device
    # no vkGetMemoryFdPropertiesKHR: it is not allowed for OPAQUE_FD (VUID-...-handleType-00674;
    # NVIDIA's driver returns VK_ERROR_UNKNOWN), whose memory type must be the exporter's: the
    # same choice from the same buffer requirements on the same physical device
    pbuf, _, type_index = _external_buffer(pool, size, "imported fd memory")
    chain = _allocate_chain(pbuf[0], None)
    imported = ffi.new("VkImportMemoryFdInfoKHR*", {
        "sType": vk.VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR, "pNext": chain[0],
        "handleType": OPAQUE_FD, "fd": fd})
    ainfo = ffi.new("VkMemoryAllocateInfo*", {
        "sType": vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, "pNext": imported,
        "allocationSize": size, "memoryTypeIndex": type_index})
    memory = _allocate(pool, ainfo, pbuf[0], "imported fd memory")
    host = None
    if pool.allocator.direct:
        pdata = ffi.new("void**")
        check(lib.vkMapMemory(device, memory, 0, size, 0, pdata), "vkMapMemory", "imported fd memory")
        host = np.frombuffer(ffi.buffer(pdata[0], size), np.uint8)
    address = _address(device, pbuf[0])
    block = Block(memory, pbuf[0], address, size, host, Use.DEVICE, True, used=size, memory_type=type_index)
    return ExportedMemory(pool, Allocation(block, 0, size, address, host), size)


def open_fds() -> int:
    """How many file descriptors this process has open (Linux): what a leak test compares."""
    return len(os.listdir("/proc/self/fd"))


def _type_flags(physical: Any) -> list[int]:
    mem = vk.ffi.new("VkPhysicalDeviceMemoryProperties*")
    vk.lib.vkGetPhysicalDeviceMemoryProperties(physical, mem)
    return [int(mem.memoryTypes[i].propertyFlags) for i in range(mem.memoryTypeCount)]


def _allocate_chain(buffer: Any, export: int | None) -> list[Any]:
    """The pNext structs of a dedicated allocation with a device address (and an export of handle
    type `export`), first one first; the list keeps them all alive."""
    ffi = vk.ffi
    flags = ffi.new("VkMemoryAllocateFlagsInfo*", {
        "sType": _STYPE_MEMORY_ALLOCATE_FLAGS_INFO, "flags": _MEMORY_ALLOCATE_DEVICE_ADDRESS})
    dedicated = ffi.new("VkMemoryDedicatedAllocateInfo*", {
        "sType": vk.VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO, "pNext": flags, "buffer": buffer})
    if export is None:
        return [dedicated, flags]
    exported = ffi.new("VkExportMemoryAllocateInfo*", {
        "sType": vk.VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO, "pNext": dedicated, "handleTypes": export})
    return [exported, dedicated, flags]


def _allocate(pool: DevicePool, ainfo: Any, buffer: Any, what: str) -> Any:
    """vkAllocateMemory + vkBindBufferMemory; the buffer is destroyed if either fails."""
    ffi, lib = vk.ffi, vk.lib
    pmem = ffi.new("VkDeviceMemory*")
    result = lib.vkAllocateMemory(pool.device, ainfo, ffi.NULL, pmem)
    if result != 0:
        lib.vkDestroyBuffer(pool.device, buffer, ffi.NULL)
        check(result, "vkAllocateMemory", f"{what}: " + pool.allocator.shortfall(ainfo.allocationSize))
    bound = lib.vkBindBufferMemory(pool.device, buffer, pmem[0], 0)
    if bound != 0:
        lib.vkDestroyBuffer(pool.device, buffer, ffi.NULL)
        lib.vkFreeMemory(pool.device, pmem[0], ffi.NULL)
        check(bound, "vkBindBufferMemory", what)
    return pmem[0]


def _address(device: Any, buffer: Any) -> int:
    info = vk.ffi.new("VkBufferDeviceAddressInfo*", {"sType": _STYPE_BUFFER_DEVICE_ADDRESS_INFO,
                                                    "buffer": buffer})
    return int(vk.lib.vkGetBufferDeviceAddress(device, info))
