"""How many freed dedicated blocks the allocator keeps for reuse, per use of memory.

A dedicated block (an allocation over a quarter of the allocator's block size: a chunk's buffer,
its staging) is kept when freed while the use's footprint, the bytes of its dedicated blocks in
use plus those kept, stays within

    limit = max(cache_limit, min(peak, heap // 2))     (0 where cache_limit is 0: keep nothing)

where `peak` is the most bytes of that use's dedicated blocks ever in use at once; where a freed
block does not fit, the least recently freed kept blocks of that use (other chunk sizes' buffers,
say) are destroyed to make room, not the block just freed. So a workload
that holds N chunk-sized buffers at once keeps N, whatever the chunk size (the cache never holds
more than the workload itself needed at its peak), and never more than half the heap the memory
comes from. The old fixed cap (an eighth of device memory, at most 8 GiB, for every use together)
was under what 16 threads hold at once with chunks of 128 MiB and up (4 buffers a task), so every
compute destroyed and made again page-locked staging, which NVIDIA's driver allocates at ~3-4
GB/s: W1 fell from 15 to 1.1 GB/s (issue 18, BENCHMARKS.md "data_path"). `dropped()` (the
allocator's trim, also on an allocation failure) forgets the kept blocks and the peaks, so
memory pressure lets the cache learn its size again.

Not thread-safe by itself: the allocator calls it under its lock.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from typing import Any

from lazyfuel.backends.vulkan.memtypes import Use


class DedicatedCache:
    """Bytes of dedicated blocks in use and kept, the peak in use, and the kept blocks from the
    least recently freed, per `Use`."""

    def __init__(self) -> None:
        self.in_use: Counter[Use] = Counter()
        self.kept: Counter[Use] = Counter()
        self.peak: Counter[Use] = Counter()
        self._order: dict[Use, OrderedDict[int, tuple[int, Any]]] = {use: OrderedDict() for use in Use}

    def add(self, use: Use, size: int) -> None:
        """A new dedicated block of `size` bytes was handed out."""
        self.in_use[use] += size
        self.peak[use] = max(self.peak[use], self.in_use[use])

    def reuse(self, use: Use, size: int, item: Any) -> None:
        """The kept `item` of `size` bytes was handed out again."""
        del self._order[use][id(item)]
        self.kept[use] -= size
        self.add(use, size)

    def limit(self, use: Use, cache_limit: int, heap: int) -> int:
        """The most bytes `use`'s dedicated blocks may hold, in use and kept (see the module)."""
        if cache_limit <= 0:
            return 0
        return max(cache_limit, min(self.peak[use], heap // 2))

    def keep(self, use: Use, size: int, limit: int, item: Any) -> list[Any]:
        """`item`, a block of `size` bytes, is freed: it is kept, the least recently freed kept
        blocks of `use` making room within `limit`; returns what the caller destroys (those blocks,
        or `item` itself where it alone is over the limit)."""
        self.in_use[use] -= size
        if self.in_use[use] + size > limit:
            return [item]
        order, dropped = self._order[use], []
        while order and self.in_use[use] + self.kept[use] + size > limit:
            old_size, old = order.popitem(last=False)[1]
            self.kept[use] -= old_size
            dropped.append(old)
        order[id(item)] = (size, item)
        self.kept[use] += size
        return dropped

    def dropped(self) -> None:
        """Every kept block was destroyed: start learning the peaks again."""
        self.kept.clear()
        for order in self._order.values():
            order.clear()
        self.peak = Counter(self.in_use)
