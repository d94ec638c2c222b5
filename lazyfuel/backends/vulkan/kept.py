"""Pageable host arrays used again and again: their pages imported once and kept while they live.

A plain numpy array reaches a discrete GPU through page-locked memory: in the copying modes the
CPU copies every byte into staging and every result byte out of it, and in the importing modes
the driver pins the array's pages at each run and unpins them after (VK_EXT_external_memory_host).
A workload that computes over the same arrays again (W1 of issue 18: one 4 GiB `x`, results into
one reused `out=`) pays that on every compute: two host copies per byte cap it near 15-20 GB/s on
the H200's 16 CPUs, while page-locked memory moves at the link's 35-38 GB/s.

`KeptImports.find(batch, span)` returns, for a span (1-d uint8, a program input's bytes or a
result's destination) whose kept range (below) holds at least `KEEP_MIN` bytes, an allocation over
its pages imported once and kept, or None (then the span moves its mode's usual way). The range,
not the span, decides (a span under `KEEP_MIN / SPAN_SHARE`, a few rows, is always copied): W3's
host mask (16 MiB, read 1 MiB a block) is kept whole, so a replayed persist reads each block's
mask in place instead of the CPU copying it into staging on the one replaying thread (0.35 ms of
the 0.5 ms a block the host took on the H200):

- the owner is imported in segments of `SEGMENT` (1 GiB) bytes from its start, so every chunk
  inside one segment, of whatever chunking, shares its import and the pages are pinned once (a
  chunk across two segments is kept as a range of its own);
- a range is kept from the second time one span in it is seen (same owner, address and size):
  an array used once moves the old way and pins nothing; the lookups are dictionary reads; one
  thread imports a range while the others' runs move their spans the usual way (16 threads
  each pinning the same 1 GiB segment imported 66 GiB in one compute on the H200);
- the owner is the ndarray at the end of the span's `base` chain, and only one that owns its data
  (numpy's own allocation) is kept: its `weakref.finalize` releases the import when it is
  collected, and each lookup checks that the owner is alive and its data pointer unchanged
  (numpy refuses `ndarray.resize` on an array with weak references; a moved owner's stale
  import would be dropped, never read);
- while a batch uses an import it is counted as in use, and released no earlier than that
  batch's close (after its fence);
- the bytes kept are bounded by `lazyfuel.config.kept_imports` (a fraction of host memory, 0.5
  by default, read at each import since a VM's memory may grow, or bytes; 0 keeps nothing): past
  it the least recently used imports no batch uses are released first, and a span that still
  does not fit moves the usual way.

Keeping allocates nothing: the pages are the user's arrays, alive anyway; while kept they cannot
be swapped out or migrated (unlike `lf.empty_pinned`, decision 41, which is memory of its own).
Where device memory is the host's own (`allocator.direct`: lavapipe, integrated GPUs) or the
device cannot import host memory, nothing is kept.
"""

from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from lazyfuel import host_memory
from lazyfuel.backends.vulkan.memory import Allocation, VulkanAllocator
from lazyfuel.layout import _Holder, memory_span
from lazyfuel.settings import config

if TYPE_CHECKING:
    from lazyfuel.backends.vulkan.batch import Batch

KEEP_MIN = 4 << 20  # a smaller kept range (a small mask or indices) is copied: pinning it saves little
# A span under KEEP_MIN / SPAN_SHARE is copied whatever its range: a few rows of a large array would
# otherwise pin a whole segment on their second use (W3's 1 MiB mask blocks are well above it).
SPAN_SHARE = 16
SEGMENT = 1 << 30  # an owner is imported in ranges of this many bytes (under maxMemoryAllocationSize)


def kept_budget() -> int:
    """The bytes `KeptImports` may keep imported at once: `config.kept_imports` as a fraction of
    host memory (read now: a VM's memory grows as it is used) or bytes; 0 keeps nothing."""
    value = config.kept_imports
    return host_memory.budget_bytes(value) if value else 0


def owner_of(span: np.ndarray) -> np.ndarray | None:
    """The ndarray at the end of `span`'s base chain (through `layout.memory_span`'s and
    `as_strided`'s holders), where it owns its memory (numpy allocated it); None for memory numpy
    did not allocate (a memmap, bytes, another library's buffer)."""
    owner: Any = span
    while True:
        if isinstance(owner, np.ndarray) and owner.base is not None:
            owner = owner.base
        elif isinstance(owner, _Holder):  # `memory_span`'s byte range of a view: its array
            owner = owner.keep
        elif not isinstance(owner, np.ndarray) and hasattr(owner, "__array_interface__") \
                and isinstance(getattr(owner, "base", None), np.ndarray):
            owner = owner.base  # `as_strided`'s holder (a spanning view over chunks): its array
        else:
            break
    if not isinstance(owner, np.ndarray) or not owner.flags.owndata or isinstance(owner, np.memmap):
        return None
    return owner


def kept_range(start: int, nbytes: int, owner_bytes: int) -> tuple[int, int] | None:
    """The range of its owner's bytes (offset, length) kept imported for the span of `nbytes` at
    offset `start`: the owner is kept in segments of `SEGMENT` bytes from its start, so spans of
    any chunking inside one segment share one import (the pages are pinned once); a span across
    two segments is kept as its own range. None where the span is not inside the owner."""
    if start < 0 or start + nbytes > owner_bytes:
        return None
    first = start // SEGMENT
    if (start + nbytes - 1) // SEGMENT != first:
        return start, nbytes
    return first * SEGMENT, min(SEGMENT, owner_bytes - first * SEGMENT)


def _address(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


@dataclass(eq=False)
class _Entry:
    """One kept import: `allocation` over the span's pages; `owner_data`: the owner's data pointer
    when it was made; `users`: batches using it now."""

    allocation: Allocation | None
    allocator: VulkanAllocator  # the one that imported it, which frees it
    owner: weakref.ref
    owner_data: int
    nbytes: int
    users: int = 0
    last_used: float = field(default_factory=time.monotonic)
    dead: bool = False


class KeptImports:
    """The kept imports of one pool's device; thread-safe."""

    def __init__(self) -> None:
        self._entries: dict[tuple[int, int], _Entry] = {}  # (span address, nbytes) -> import
        # ranges not imported: their owner, its data pointer, and the spans in them seen once
        self._seen: dict[tuple[int, int], tuple[weakref.ref, int, set[tuple[int, int]]]] = {}
        self._lock = threading.RLock()  # an owner's finalizer may run inside a locked section
        self._importing: set[tuple[int, int]] = set()  # ranges one thread is importing now
        self._imported = threading.Condition(self._lock)  # notified as a range leaves `_importing`
        self.kept_bytes = 0
        self._reserved = 0  # bytes of imports being made that will be kept: counted in the budget
        self.made = self.made_bytes = 0  # imports made so far and their bytes (benchmarks report them)
        self.closed = False

    @property
    def live(self) -> int:
        """Imports kept now."""
        return len(self._entries)

    def find(self, batch: Batch, span: np.ndarray, note: bool = True) -> Allocation | None:
        """`span` (1-d uint8) as an allocation over its kept imported pages, in use until `batch`
        closes; None where it is not kept (see the module docstring). `note=False`: a look that
        does not count as a use (a result's destination is looked at again where it is not kept)."""
        allocator = batch.pool.allocator
        if span.nbytes < KEEP_MIN // SPAN_SHARE or allocator.direct or allocator.imports is None \
                or self.closed or not config.kept_imports:
            return None
        owner = owner_of(span)
        if owner is None:
            return None
        owner_data = _address(owner)
        dense = owner.flags.c_contiguous or owner.flags.f_contiguous
        kept = kept_range(_address(span) - owner_data, span.nbytes,
                          owner.nbytes if dense else memory_span(owner).nbytes)
        if kept is None or kept[1] < KEEP_MIN:
            return None  # the range, not the span: W3's 1 MiB mask blocks of a 16 MiB mask are kept
        key = (owner_data + kept[0], kept[1])
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and (entry.owner() is not owner or entry.owner_data != owner_data):
                self._drop_locked(key, entry)  # the owner went or its data moved: never read it
                entry = None
            if entry is None:
                seen = self._seen.get(key)
                if seen is None or seen[0]() is not owner or seen[1] != owner_data:
                    if not note:
                        return None
                    seen = self._seen[key] = (weakref.ref(owner), owner_data, set())
                    weakref.finalize(owner, self._forget, key)  # also drops the import, once made
                spans = seen[2]
                if (_address(span), span.nbytes) not in spans:  # this span's first use
                    if note:
                        spans.add((_address(span), span.nbytes))
                    return None
                if key in self._importing:  # another thread is pinning it: this run copies
                    return None
                if not self._make_room_locked(kept[1], kept_budget()):
                    return None
                self._importing.add(key)
                self._reserved += kept[1]
            else:
                entry.users += 1
                entry.last_used = time.monotonic()
        if entry is None:
            entry = self._import(allocator, key, memory_span(owner)[kept[0]:kept[0] + kept[1]], owner,
                                 owner_data, reserved=kept[1])
        if entry is None:
            return None
        batch.after_close(lambda: self._done(key, entry))
        whole = entry.allocation
        delta = _address(span) - key[0]  # where the span starts in the kept range
        return Allocation(whole.block, whole.offset + delta, whole.size - delta, whole.address + delta, None)

    def holds(self, owner: np.ndarray, start: int, nbytes: int) -> bool:
        """Whether bytes `start:start + nbytes` of `owner` are kept imported now (`hold` of them
        would pin nothing)."""
        owner_data = _address(owner)
        with self._lock:
            entry = self._entries.get((owner_data + start, nbytes))
            return entry is not None and entry.owner() is owner and entry.owner_data == owner_data

    def hold(self, batch: Batch, owner: np.ndarray, start: int, nbytes: int) -> Allocation | None:
        """Bytes `start:start + nbytes` of `owner` (an array `owner_of` accepts, dense) as an
        allocation over its imported pages, in use until `batch` closes: the kept import where
        there is one, else imported now, kept where `kept_budget` has room (least recently used
        idle imports released first) and released at the batch's close where it has not. Unlike
        `find`, the first use imports, mapped device memory does not refuse (lavapipe imports too)
        and another thread's import of the range is waited for. None where the device cannot
        import host memory or the driver refuses the range (the caller moves the rows its other
        way). Used by a kernel that reads the rows of a host table where they lie (`host_gather`)."""
        allocator = batch.pool.allocator
        if allocator.imports is None or self.closed or nbytes <= 0:
            return None
        owner_data = _address(owner)
        key = (owner_data + start, nbytes)
        with self._lock:
            while True:
                entry = self._entries.get(key)
                if entry is not None and (entry.owner() is not owner or entry.owner_data != owner_data):
                    self._drop_locked(key, entry)
                    entry = None
                if entry is not None:
                    entry.users += 1
                    entry.last_used = time.monotonic()
                    break
                if key not in self._importing:
                    keep = bool(config.kept_imports) and self._make_room_locked(nbytes, kept_budget())
                    reserved = nbytes if keep else 0
                    self._importing.add(key)
                    self._reserved += reserved
                    if (key not in self._seen or self._seen[key][0]() is not owner
                            or self._seen[key][1] != owner_data):
                        self._seen[key] = (weakref.ref(owner), owner_data, set())
                        weakref.finalize(owner, self._forget, key)
                    break
                self._imported.wait()  # another thread pins this range: its import is shared when made
        if entry is None:
            entry = self._import(allocator, key, memory_span(owner)[start:start + nbytes], owner,
                                 owner_data, keep=keep, reserved=reserved)
        if entry is None:
            return None
        batch.after_close(lambda: self._done(key, entry))
        return entry.allocation

    def _import(self, allocator: VulkanAllocator, key: tuple[int, int], span: np.ndarray,
                owner: np.ndarray, owner_data: int, keep: bool = True, reserved: int = 0) -> _Entry | None:
        """Import `span`'s pages (outside the lock: pinning takes time) and keep them (with `keep`),
        in use once; `key` is no longer being imported, and its `reserved` bytes of the budget are
        given back (kept bytes instead where it is kept), when this returns."""
        try:
            allocation = allocator.import_host(span)
        except BaseException:
            self._imported_now(key, reserved)
            raise
        if allocation is None:
            self._imported_now(key, reserved)
            return None
        allocation.block.keep = None  # the owner's finalizer, not the import, decides its life
        entry = _Entry(allocation, allocator, weakref.ref(owner), owner_data, span.nbytes, users=1)
        with self._lock:
            if self.closed or key in self._entries or not keep:  # closed meanwhile, kept by another
                # thread, or no room to keep it:
                entry.dead = True  # this one serves this batch alone, released when it closes
            else:
                self._entries[key] = entry
                self.kept_bytes += span.nbytes
            self.made += 1
            self.made_bytes += span.nbytes
            self._imported_now(key, reserved)  # with the entry in: a waiting `hold` finds it
        return entry

    def _imported_now(self, key: tuple[int, int], reserved: int) -> None:
        """`key`'s range is no longer being imported (its `reserved` bytes given back): wake the
        `hold`s waiting on it."""
        with self._lock:
            self._reserved -= reserved
            self._importing.discard(key)
            self._imported.notify_all()

    def _make_room_locked(self, nbytes: int, budget: int) -> bool:
        """Release least recently used imports no batch uses until `nbytes` more fit `budget`
        (beside those kept and those another thread is importing to keep)."""
        if nbytes > budget:
            return False
        idle = sorted((e.last_used, k) for k, e in self._entries.items() if not e.users)
        for _, key in idle:
            if self.kept_bytes + self._reserved + nbytes <= budget:
                break
            entry = self._entries.get(key)
            if entry is not None:
                self._drop_locked(key, entry)
        return self.kept_bytes + self._reserved + nbytes <= budget

    def _drop_locked(self, key: tuple[int, int], entry: _Entry) -> None:
        """Stop keeping `entry`: released now where no batch uses it, else by the last one's close."""
        if self._entries.get(key) is entry:
            del self._entries[key]
            self.kept_bytes -= entry.nbytes
        entry.dead = True
        if not entry.users:
            self._release(entry)

    def _release(self, entry: _Entry) -> None:
        allocation, entry.allocation = entry.allocation, None
        if allocation is not None:
            entry.allocator.free(allocation)

    def _done(self, key: tuple[int, int], entry: _Entry) -> None:
        """A batch using `entry` closed (its fence passed)."""
        with self._lock:
            entry.users -= 1
            if entry.dead and not entry.users:
                self._release(entry)

    def _forget(self, key: tuple[int, int]) -> None:
        """An owner was collected: its imports are released (its pages may be reused at once)."""
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None and seen[0]() is None:
                del self._seen[key]
            entry = self._entries.get(key)
            if entry is not None and entry.owner() is None:
                self._drop_locked(key, entry)

    def close(self) -> None:
        """The pool is closing (nothing in flight): release every import."""
        with self._lock:
            self.closed = True
            for key, entry in list(self._entries.items()):
                self._drop_locked(key, entry)
            self._seen.clear()
