"""Device memory: large blocks, sub-allocated by size class and reused.

Every block is one VkDeviceMemory bound to one VkBuffer (storage + transfer + device address),
so an `Allocation` is (block, offset, size): kernels bind (buffer, offset, range) as a storage
buffer or reach it by device address (the block's plus the offset), and no per-allocation Vulkan
object is made. Sizes round up to a size class (four per octave, at least 256 bytes, a multiple
of 16 and of minStorageBufferOffsetAlignment), so every offset is aligned for a binding. Freed
allocations go to a free list per class and are handed out again; allocations over a quarter of
a block get a block of their own, kept for reuse when freed (`cache_policy.py`: per use, as many
bytes as that use held at once at its peak, at least `cache_limit` (by default an eighth of
device memory, 512 MiB to 8 GiB) and at most half its heap, the least recently freed making
room): a GPU's dask threads each hold several chunk-sized buffers, and page-locked staging made
anew costs more than the copy through it (the H200's driver makes it at ~3-4 GB/s, device memory
at ~45), so a fixed cap under what one compute holds at once made every compute allocate its
staging again (issue 18's cliff at chunks of 128 MiB and up).

Where device memory is the host's own cached memory (lavapipe, integrated GPUs) device
allocations are mapped and `Allocation.host` is a numpy view of them: uploads and downloads are
plain memory copies. Elsewhere (a discrete GPU, even one whose BAR makes device memory
host-visible: the CPU reads that uncached) device allocations have `host = None` and the batch
stages through `alloc(…, staging=True)` (upload) and `alloc(…, download=True)` allocations, each
from the memory type `memtypes` picks for that direction. Where the device imports host memory
(VK_EXT_external_memory_host), a staging block is host pages of the allocator's own, faulted by
the thread that asks and imported (`_staging_pages`; `staging_pages` False makes the driver's):
NVIDIA's driver makes its page-locked blocks at 2-4 GB/s one at a time, so a first compute whose
threads each made their staging waited on one another. Blocks of their own are made outside the
allocator's lock, so threads make theirs at once (decision 114); so are shared blocks, a thread
that finds no room while another makes one with room for it too waiting for that one
(`_shared_new`, decision 116). `mode` (`memtypes.Mode`) says how
host arrays reach the device; `import_host` wraps a host array's own pages as an allocation
(VK_EXT_external_memory_host) that `free` releases.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import vulkan as vk

from lazyfuel import prep_gate
from lazyfuel.backends.vulkan import faults
from lazyfuel.backends.vulkan.cache_policy import DedicatedCache
from lazyfuel.backends.vulkan.check import VK_ERROR_OUT_OF_DEVICE_MEMORY, VulkanMemoryError, check
from lazyfuel.backends.vulkan.devices import DeviceInfo
from lazyfuel.backends.vulkan.hostmem import HostImports, Imported
from lazyfuel.backends.vulkan.memtypes import Mode, Use, choose_mode, maps_device_memory, memory_type

# Vulkan 1.2 names whose values the `vulkan` package leaves as None.
BUFFER_USAGE_SHADER_DEVICE_ADDRESS = 0x00020000
MEMORY_ALLOCATE_DEVICE_ADDRESS = 0x00000002
_STYPE_MEMORY_ALLOCATE_FLAGS_INFO = 1000060000
_STYPE_BUFFER_DEVICE_ADDRESS_INFO = 1000244001

BUFFER_USAGE = (vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
                | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT | BUFFER_USAGE_SHADER_DEVICE_ADDRESS)
IMPORT_MIN = 256 << 10  # smaller host arrays are copied: importing costs more than copying them
PAGE_STRIDE = 4096  # staging pages are faulted by writing one byte this far apart (the smallest page)

MIN_CLASS = 256
ALIGN = 16


def faulted_pages(nbytes: int, page: int) -> tuple[np.ndarray, np.ndarray]:
    """Fresh host memory for `nbytes` starting on a `page` boundary, every page written once on the
    calling thread (so faulted in here, not one by one later): (the allocation, which keeps the
    memory alive, and its aligned `nbytes` view). MemoryError where the host has no room."""
    raw = np.empty(nbytes + page, np.uint8)
    skip = -int(raw.__array_interface__["data"][0]) % page
    view = raw[skip:skip + nbytes]
    view[::PAGE_STRIDE] = 0
    return raw, view


OPEN_BLOCKS = 4  # shared blocks of one use kept open for sub-allocation, the newest


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
    use: Use
    dedicated: bool
    used: int = 0  # bump pointer for sub-allocation
    imported: Imported | None = None  # a host array's own pages imported as this block (`import_host`)
    keep: Any = None  # the host array an imported block maps, kept alive until it is freed
    memory_type: int = -1  # the memory type index it was allocated from (-1: imported)
    pages: Imported | None = None  # staging made of the allocator's own host pages, imported

    @property
    def staging(self) -> bool:
        """Host-side staging memory (not the kernels' device memory)."""
        return self.use is not Use.DEVICE


@dataclass(eq=False)
class _Making:
    """A shared block one thread is making: the room it will have once the bytes the maker and
    the threads waiting on it asked for are taken, and the event set once it is open (or failed)."""

    room: int
    done: threading.Event = field(default_factory=threading.Event)


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

    def part(self, offset: int, nbytes: int) -> Allocation:
        """`nbytes` of this allocation from byte `offset` on, as an allocation of their own (a view
        of the same memory: freeing stays with this one)."""
        host = None if self.host is None else self.host[offset:offset + nbytes]
        return Allocation(self.block, self.offset + offset, nbytes, self.address + offset, host)


class VulkanAllocator:
    """Sub-allocates device (and staging) memory for one VkDevice; thread-safe."""

    def __init__(self, device: Any, physical: Any, info: DeviceInfo, block_size: int = 64 << 20,
                 cache_limit: int | None = None, mode: Mode | str | None = None) -> None:
        """Sub-allocate on `device`; `mode` (a `Mode` or its name; default `LAZYFUEL_VULKAN_TRANSFER`,
        else the device's default) says how host arrays move (ValueError where it cannot)."""
        self.device, self.info = device, info
        self.block_size = min(block_size, info.max_memory_allocation_size)
        if cache_limit is None:
            cache_limit = min(max(info.device_local_bytes // 8, 512 << 20), 8 << 30)
        self.cache_limit = cache_limit  # kept whatever the peak (0: keep nothing, as the fault tests do)
        mem = vk.ffi.new("VkPhysicalDeviceMemoryProperties*")
        vk.lib.vkGetPhysicalDeviceMemoryProperties(physical, mem)
        self._type_flags = [int(mem.memoryTypes[i].propertyFlags) for i in range(mem.memoryTypeCount)]
        self._type_heaps = [int(mem.memoryHeaps[mem.memoryTypes[i].heapIndex].size)
                            for i in range(mem.memoryTypeCount)]
        self.imports = HostImports.open(device, physical, tuple(self._type_heaps),
                                        info.max_memory_allocation_size)
        if not isinstance(mode, Mode):
            mode = choose_mode(self._type_flags, self.imports is not None, mode)
        self.mode = mode
        # device blocks are mapped (no staging); tests clear it to exercise the staging path
        self.direct = maps_device_memory(mode, self._type_flags)
        self.import_min = IMPORT_MIN  # tests lower it to import small arrays
        self.staging_pages = True  # staging of own pages imported where it can be (tests clear it)
        # storage-buffer bindings need offsets aligned to minStorageBufferOffsetAlignment
        self.align = max(ALIGN, info.min_storage_buffer_offset_alignment)
        self._lock = threading.Lock()
        self._blocks: list[Block] = []
        # per use, the shared blocks with room left, newest last (several where threads made
        # theirs at once: `alloc` makes shared blocks outside the lock)
        self._open: dict[Use, list[Block]] = {use: [] for use in Use}
        self._making: dict[Use, list[_Making]] = {use: [] for use in Use}  # shared blocks being made
        self._free: dict[tuple[Use, int], list[Allocation]] = {}
        self._dedicated = DedicatedCache()
        self.in_use = 0
        # Debugging aid for tests: when set, every host-visible allocation is filled with this byte
        # before it is handed out, so an element a kernel forgets to write shows up.
        self.poison: int | None = None
        # pre-built structs for block creation
        self._flags_info = vk.ffi.new("VkMemoryAllocateFlagsInfo*", {
            "sType": _STYPE_MEMORY_ALLOCATE_FLAGS_INFO, "flags": MEMORY_ALLOCATE_DEVICE_ADDRESS})

    # -- public ---------------------------------------------------------------------------------
    def alloc(self, nbytes: int, staging: bool = False, download: bool = False) -> Allocation:
        """At least `nbytes` (rounded to a size class) of device memory, or of host-visible staging
        memory: for uploads with `staging`, for downloads (host-cached where the device has it) with
        `download`; device memory where that is mapped. Raises VulkanMemoryError saying what was
        asked and what may be free (`shortfall`)."""
        size = size_class(max(int(nbytes), 1), self.align)
        use = Use.DOWNLOAD if download else Use.UPLOAD if staging else Use.DEVICE
        if self.direct:
            use = Use.DEVICE
        if size > self.info.max_memory_allocation_size:
            raise VulkanMemoryError("vkAllocateMemory", VK_ERROR_OUT_OF_DEVICE_MEMORY, self.shortfall(
                nbytes, f"({size} as allocated) in one buffer, over the device's maxMemoryAllocationSize of "
                f"{self.info.max_memory_allocation_size} bytes"))
        with self._lock:
            free = self._free.get((use, size))
            found = None
            if free:
                found = free.pop()
                if found.block.dedicated:
                    self._dedicated.reuse(use, size, found)
            shared = size <= self.block_size // 4
            if found is None and shared:
                found = self._bump(self._open[use], size)
            if found is not None:
                self.in_use += size
        if found is None and shared:
            found = self._shared_new(size, use)
        elif found is None:  # a block of its own, made outside the lock: threads make theirs at once
            block = self._new_unlocked(size, use, dedicated=True)
            with self._lock:
                self._blocks.append(block)
                found = self._whole(block)
                self._dedicated.add(use, size)
                self.in_use += size
        if self.poison is not None and found.host is not None:
            found.host[:] = self.poison
        return found

    def import_host(self, data: np.ndarray) -> Allocation | None:
        """`data` (1-d uint8, e.g. `memory_span(a)`) as an allocation over its own pages, or None
        where it is under `import_min` bytes or cannot be imported (then copy it). The allocation
        keeps `data` alive until `free`, which must come after the work using it finished; its
        `host` is None (the bytes are `data`'s) and its offset has `data`'s alignment in a page."""
        if self.imports is None or data.nbytes < max(self.import_min, 1):
            return None
        prep_gate.release()  # the driver pins the pages: no need of the task's turn
        address = int(data.__array_interface__["data"][0])
        found = self.imports.import_range(address, data.nbytes, BUFFER_USAGE)
        if found is None:
            return None
        block = Block(found.memory, found.buffer, found.address, found.size, None, Use.DEVICE, True,
                      found.size, found, data)
        return Allocation(block, found.offset, found.size - found.offset, found.address + found.offset, None)

    def free(self, allocation: Allocation) -> None:
        """Return `allocation` for reuse (the caller's work using it must have finished)."""
        block = allocation.block
        if block.imported is not None:  # unpin the host pages; they were never counted in use
            if self.imports is not None:
                self.imports.release(block.imported)
            block.imported = block.keep = None
            return
        with self._lock:
            self.in_use -= allocation.size
            block = allocation.block
            if block.dedicated:
                limit = self._dedicated.limit(block.use, self.cache_limit, self._heap_of(block))
                dropped = self._dedicated.keep(block.use, allocation.size, limit, allocation)
                for old in dropped:
                    if old is not allocation:
                        self._free[(old.block.use, old.size)].remove(old)
                    self._destroy_block(old.block)
                if any(old is allocation for old in dropped):
                    return
            self._free.setdefault((block.use, allocation.size), []).append(allocation)

    def trim(self) -> int:
        """Destroy cached free dedicated blocks; return the bytes released."""
        with self._lock:
            return self._trim_locked()

    def shortfall(self, asked: int, why: str = "") -> str:
        """What an out-of-memory error says: the bytes asked (and `why` they cannot be had), the
        device-local heap, what this pool holds and so what may be free. (The devices seen so far
        lack VK_EXT_memory_budget, so "free" is the heap less this pool's own blocks: other pools
        and processes may hold more.)"""
        heap, reserved = self.info.device_local_bytes, self.reserved
        return (f"asked for {asked} bytes{' ' + why if why else ''}; device-local heap {heap} bytes, "
                f"this pool holds {reserved} in blocks ({self.in_use} in use), so at most "
                f"{max(heap - reserved, 0)} free")

    @property
    def reserved(self) -> int:
        """Bytes of device memory held in blocks."""
        return sum(b.size for b in self._blocks)

    def resources(self) -> dict[str, int]:
        """What the allocator holds now: `blocks` (each one VkDeviceMemory and its VkBuffer),
        `reserved` bytes in them, `in_use` bytes handed out and not freed, `cached` freed
        allocations kept for reuse, `imports` (host arrays' ranges imported, not yet released) and
        `page_blocks` (staging blocks of the allocator's own pages imported)."""
        with self._lock:
            pages = sum(block.pages is not None for block in self._blocks)
            return {"blocks": len(self._blocks), "reserved": self.reserved, "in_use": self.in_use,
                    "cached": sum(len(free) for free in self._free.values()),
                    "imports": 0 if self.imports is None else self.imports.live - pages,
                    "page_blocks": pages}

    def destroy(self) -> None:
        """Free every block (all work using them must have finished)."""
        with self._lock:
            for block in list(self._blocks):
                self._destroy_block(block)
            self._free.clear()
            self._open = {use: [] for use in Use}

    # -- blocks ---------------------------------------------------------------------------------
    def _whole(self, block: Block) -> Allocation:
        block.used = block.size
        return Allocation(block, 0, block.size, block.address, block.host)

    def _bump(self, blocks: list[Block], size: int) -> Allocation | None:
        """`size` bytes from the free end of the first of the open shared `blocks` with room (the
        caller holds the lock), or None; a block left with less room than the smallest size
        class is no longer open."""
        for block in blocks:
            if block.used + size <= block.size:
                offset = block.used
                block.used += size
                if block.size - block.used < size_class(1, self.align):
                    blocks.remove(block)
                host = None if block.host is None else block.host[offset:offset + size]
                return Allocation(block, offset, size, block.address + offset, host)
        return None

    def _shared_new(self, size: int, use: Use) -> Allocation:
        """`size` bytes of a new shared block, made outside the lock (it may take a while), or of
        one another thread is making with room for them too: then that one is waited for, so
        threads that find no room at once make the blocks they need between them, not one each
        (W2's first compute(device=True) on the H200 made four 64 MiB staging blocks at once,
        32-49 ms each, where one more was needed)."""
        while True:
            with self._lock:
                found = self._bump(self._open[use], size)  # one finished meanwhile may have room
                if found is not None:
                    self.in_use += size
                    return found
                making = next((m for m in self._making[use] if m.room >= size), None)
                mine = making is None
                if mine:
                    making = _Making(self.block_size - size)
                    self._making[use].append(making)
                else:
                    making.room -= size
            if not mine:
                making.done.wait()  # then bump from it (or, taken meanwhile, make another)
                continue
            try:
                block = self._new_unlocked(self.block_size, use, dedicated=False)
            except BaseException:
                with self._lock:
                    self._making[use].remove(making)
                making.done.set()  # the waiters try again, each for itself
                raise
            with self._lock:
                self._making[use].remove(making)
                self._blocks.append(block)
                self._open[use].append(block)  # beside any made meanwhile: their room is used too
                del self._open[use][:-OPEN_BLOCKS]
                found = self._bump(self._open[use], size)  # the first with room: ours at the latest
                self.in_use += size
            making.done.set()
            return found

    def type_for(self, use: Use) -> int:
        """The memory type index blocks for `use` get (buffers of BUFFER_USAGE allow every type
        on the devices seen so far; `_create_block` asks with the buffer's real type bits)."""
        return memory_type(self._type_flags, (1 << len(self._type_flags)) - 1, use, self.direct)

    def type_flags(self, index: int) -> int:
        """The VkMemoryPropertyFlags of memory type `index`."""
        return self._type_flags[index]

    def heap_bytes(self, index: int) -> int:
        """The size of the heap memory type `index` comes from (no block may be larger)."""
        return self._type_heaps[index]

    def _heap_of(self, block: Block) -> int:
        return self._type_heaps[block.memory_type] if block.memory_type >= 0 else 0

    def _new_unlocked(self, size: int, use: Use, dedicated: bool) -> Block:
        """A block, made without the lock (the caller tracks it); on running out, cached blocks
        are freed (under the lock) and it is asked for once more."""
        try:
            return self._made(size, use, dedicated)
        except VulkanMemoryError:
            with self._lock:
                trimmed = self._trim_locked()
            if not trimmed:
                raise
            return self._made(size, use, dedicated)

    def _made(self, size: int, use: Use, dedicated: bool) -> Block:
        """A new block for the allocator's own use: staging of host pages imported where it can
        be (`_staging_pages`), else the driver's (`make_block`)."""
        if use is not Use.DEVICE and not self.direct and self.imports is not None and self.staging_pages:
            block = self._staging_pages(size, use, dedicated)
            if block is not None:
                return block
        return self.make_block(size, use, dedicated)

    def _staging_pages(self, size: int, use: Use, dedicated: bool) -> Block | None:
        """Staging of `size` bytes as host pages of the allocator's own, written on the calling
        thread and imported (VK_EXT_external_memory_host); None where the host has no memory for
        them, the driver refuses them or offers no host-coherent type for them (then the driver's
        staging is asked for). NVIDIA's driver makes its own page-locked blocks at 2-4 GB/s, one at
        a time whatever the threads; pages faulted and imported by 16 threads at once reach ~17
        GB/s (decision 114)."""
        injected = faults.due(faults.ALLOCATE) if faults.armed else 0  # a test hook; 0 when off
        if injected:
            check(injected, "vkAllocateMemory", self.shortfall(size))
        prep_gate.release()  # the pages fault and pin without the GIL: no need of the task's turn
        nbytes = -(-size // self.imports.page) * self.imports.page
        try:
            raw, host = faulted_pages(nbytes, self.imports.page)
        except MemoryError:  # the driver's staging is asked for, and fails (or trims) as it does
            return None
        found = self.imports.import_range(int(host.__array_interface__["data"][0]), nbytes, BUFFER_USAGE)
        if found is None:
            return None
        wanted = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        if self._type_flags[found.memory_type] & wanted != wanted:  # no flushes: coherent, as the driver's
            self.imports.release(found)
            return None
        return Block(found.memory, found.buffer, found.address, size, host[:size], use, dedicated,
                     keep=raw, memory_type=found.memory_type, pages=found)

    def make_block(self, size: int, use: Use, dedicated: bool = True) -> Block:
        """A new block of `size` bytes for `use` that this allocator does not track (the caller
        frees it with `destroy_block`): mapped where `use` is host memory or device memory is."""
        ffi, lib, device = vk.ffi, vk.lib, self.device
        binfo = ffi.new("VkBufferCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, "size": size, "usage": BUFFER_USAGE,
            "sharingMode": vk.VK_SHARING_MODE_EXCLUSIVE})
        pbuf = ffi.new("VkBuffer*")
        check(lib.vkCreateBuffer(device, binfo, ffi.NULL, pbuf), "vkCreateBuffer")
        req = ffi.new("VkMemoryRequirements*")
        lib.vkGetBufferMemoryRequirements(device, pbuf[0], req)
        type_index = memory_type(self._type_flags, req.memoryTypeBits, use, self.direct)
        if req.size > self._type_heaps[type_index]:  # no driver can give it; the spec forbids asking
            lib.vkDestroyBuffer(device, pbuf[0], ffi.NULL)
            raise VulkanMemoryError("vkAllocateMemory", VK_ERROR_OUT_OF_DEVICE_MEMORY, self.shortfall(
                size, f"in one block, over the {self._type_heaps[type_index]} bytes of the memory heap "
                f"{use.name.lower()} memory comes from"))
        ainfo = ffi.new("VkMemoryAllocateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, "pNext": self._flags_info,
            "allocationSize": req.size, "memoryTypeIndex": type_index})
        pmem = ffi.new("VkDeviceMemory*")
        injected = faults.due(faults.ALLOCATE) if faults.armed else 0  # a test hook; 0 when off
        result = injected or lib.vkAllocateMemory(device, ainfo, ffi.NULL, pmem)
        if result != 0:
            lib.vkDestroyBuffer(device, pbuf[0], ffi.NULL)
            check(result, "vkAllocateMemory", self.shortfall(size))
        check(lib.vkBindBufferMemory(device, pbuf[0], pmem[0], 0), "vkBindBufferMemory")
        host = None
        if use is not Use.DEVICE or self.direct:
            pdata = ffi.new("void**")
            check(lib.vkMapMemory(device, pmem[0], 0, size, 0, pdata), "vkMapMemory")
            host = np.frombuffer(ffi.buffer(pdata[0], size), np.uint8)
        ainfo_addr = ffi.new("VkBufferDeviceAddressInfo*", {
            "sType": _STYPE_BUFFER_DEVICE_ADDRESS_INFO, "buffer": pbuf[0]})
        address = int(lib.vkGetBufferDeviceAddress(device, ainfo_addr))
        return Block(pmem[0], pbuf[0], address, size, host, use, dedicated, memory_type=type_index)

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
        self._dedicated.dropped()
        return released

    def destroy_block(self, block: Block) -> None:
        """Destroy a block from `make_block` (no work using it may be in flight)."""
        block.host = None
        if block.pages is not None:  # unpin the allocator's own pages, then let them go
            self.imports.release(block.pages)
            block.pages = block.keep = None
            return
        vk.lib.vkDestroyBuffer(self.device, block.buffer, vk.ffi.NULL)
        vk.lib.vkFreeMemory(self.device, block.memory, vk.ffi.NULL)  # unmaps implicitly

    def _destroy_block(self, block: Block) -> None:
        self.destroy_block(block)
        self._blocks.remove(block)
        for blocks in self._open.values():
            if block in blocks:
                blocks.remove(block)
