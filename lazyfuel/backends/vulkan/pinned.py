"""Page-locked host arrays: numpy arrays in the driver's own host memory, which the GPU reaches
with no CPU copy.

A numpy array from `malloc` is pageable: before the GPU can read or write it, a program's bytes
are either copied by the CPU into the driver's page-locked staging memory and out again
(`staged`), or have their pages pinned and unpinned by the driver on every run (`import`). On
the H200 that caps a host -> GPU -> host pipeline at what 16 threads can memcpy (~40 GB/s, twice
per byte) or at the driver's pinning rate (~15 GB/s), while the link's DMA engines move ~50 GB/s
each way from page-locked memory (benchmarks/probes/link.py). `PinnedHost.empty(nbytes)` hands out such
memory as a numpy array, as `torch.Tensor.pin_memory()` or `cupyx.empty_pinned` do:

- on a discrete GPU, a block of the host-cached type the allocator downloads into
  (HOST_VISIBLE|HOST_CACHED system memory, page-locked by the driver): kernels write results
  into it in place, and read inputs in place where the program reads them once in long rows
  (`Program.streamed_inputs`) or the mode is `zero-copy`; other inputs are copied in with
  vkCmdCopyBuffer, still with no CPU copy;
- where device memory is the host's own (lavapipe, integrated GPUs), a mapped device block:
  kernels bind it directly, so inputs need no copy and results land in place.

`find(span)` is how `transfer.py` recognises such an array (or any view into one) among a run's
inputs and outputs: an `Allocation` over exactly those bytes, or None (then the array moves the
mode's usual way). Memory of one pool is pinned for that pool's device only; another device (or
a pool rebuilt after a device loss) moves it as any host array.

Lifetime: each array's memory is one block, freed when the last numpy view of it is garbage
collected (a `weakref.finalize` on the object the arrays' `base` chain ends in). A pool closed
while such arrays live (at exit, or after a device loss) keeps its VkDevice until the last of
them is freed, so their pages never disappear under numpy; at interpreter exit that memory is
simply left to the process's end.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

import numpy as np

from lazyfuel.backends.vulkan.memory import Allocation, Block, VulkanAllocator
from lazyfuel.backends.vulkan.memtypes import Use

PAGE = 4096


class _Pages:
    """What a pinned array's `base` chain ends in: the mapped bytes of one block (numpy keeps it
    alive through `__array_interface__`, and its collection frees the block)."""

    def __init__(self, address: int, nbytes: int) -> None:
        self.__array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (address, False),
                                    "version": 3}


class PinnedHost:
    """The page-locked host blocks of one pool's device; thread-safe."""

    def __init__(self, allocator: VulkanAllocator) -> None:
        self.allocator = allocator  # the pool's own (benchmarks may swap the pool's for a while)
        self._blocks: dict[int, Block] = {}  # start address -> block
        self._lock = threading.Lock()
        self._on_empty: Callable[[], None] | None = None

    @property
    def live(self) -> int:
        """Blocks handed out and not yet freed."""
        return len(self._blocks)

    def empty(self, nbytes: int) -> np.ndarray:
        """A 1-d uint8 array of `nbytes` page-locked bytes (contents undefined). Raises
        VulkanMemoryError (a MemoryError) saying what was asked where the driver refuses."""
        if self._on_empty is not None:
            raise RuntimeError("the Vulkan device pool is closed: get_pool() gives a new one")
        allocator = self.allocator
        use = Use.DEVICE if allocator.direct else Use.DOWNLOAD
        # whole pages: kernels bound to the last bytes may read the rest of their 16-byte word
        block = allocator.make_block(-(-max(int(nbytes), 1) // PAGE) * PAGE, use)
        start = int(block.host.__array_interface__["data"][0])
        pages = _Pages(start, block.size)
        with self._lock:
            self._blocks[start] = block
        finalizer = weakref.finalize(pages, self._release, start)
        finalizer.atexit = False  # at exit the pool leaves the memory to the process's end
        return np.asarray(pages)[:nbytes]

    def find(self, span: np.ndarray) -> Allocation | None:
        """`span` (1-d uint8, the bytes a run reads or writes) as an allocation over the pinned
        block holding all of it, or None where no block of this pool does."""
        if not self._blocks or span.nbytes == 0:
            return None
        address = int(span.__array_interface__["data"][0])
        with self._lock:
            for start, block in self._blocks.items():
                if start <= address and address + span.nbytes <= start + block.size:
                    offset = address - start  # the allocation runs to the block's end, as imports do
                    return Allocation(block, offset, block.size - offset, block.address + offset,
                                      block.host[offset:])
        return None

    def close(self, on_empty: Callable[[], None]) -> bool:
        """The pool is closing: True where no block lives (destroy the device now); else False,
        and `on_empty` (destroying the device) runs when the last block is freed."""
        with self._lock:
            if self._blocks:
                self._on_empty = on_empty
                return False
            self._on_empty = on_empty
            return True

    def _release(self, start: int) -> None:
        with self._lock:
            block = self._blocks.pop(start)
            last = self._on_empty if not self._blocks else None
        self.allocator.destroy_block(block)
        if last is not None:
            last()

