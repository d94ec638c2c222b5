"""A select's rows read by a kernel from the host table where it lies (issue 18 item 4).

`gather_in_place(pool, source, positions)` is `source[positions]` (rows along axis 0 of a
C-contiguous host array) as a new `ResidentBlock` of `pool`, written by one dispatch of the
`host_gather` shader that loads each touched row straight from the table's own pages:

- the table's owner (the ndarray at the end of `source`'s base chain, `kept.owner_of`) is imported
  as host memory (VK_EXT_external_memory_host) in segments of `segment_bytes(pool)` bytes from its
  start (1 GiB, `kept.SEGMENT`, smaller only under a smaller maxMemoryAllocationSize), each its
  own import, so a table of any size works; the imports are the pool's kept ones
  (`KeptImports.hold`): made on the first compute, reused by later ones while the owner lives;
- the ids (range-checked on the host: by the graph when the op was built, so not again for a
  task's, else here; uint32) and the segments' device addresses go up in one small upload;
  the shader maps id -> (segment, offset) for every word, so one dispatch reads every chunk
  the ids hit (rows may straddle segments: words never do);
- on a discrete GPU each load crosses the link straight into the result's device memory: no CPU
  gather, no staging, the result bytes cross once; the kernel reads every row (a share streamed
  up beside it never beat it on the H200: docs/decisions.md, 101).

None where the path cannot run (the device imports no host memory, the owner is not numpy's own
memory, the driver refuses a segment, ids past 2**32 rows): the caller then takes another way.
The planner decides when to take it (`graph.touched.streamed_where_cheaper`, priced by
`Planner.host_read_cost`); the graph layer calls it through the `base.RowReader` capability.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import numpy as np

from lazyfuel import profiling
from lazyfuel.backends.vulkan.kept import SEGMENT, owner_of
from lazyfuel.backends.vulkan.kernels import U32_LIMIT, dispatch, per_group, spec_constants
from lazyfuel.backends.vulkan.residency import ResidentBlock
from lazyfuel.backends.vulkan.shared import PerPool
from lazyfuel.checks import checked_indices
from lazyfuel.ops.push import PushLayout

if TYPE_CHECKING:
    from lazyfuel.backends.vulkan.memory import Allocation
    from lazyfuel.backends.vulkan.pool import DevicePool

FAMILY = "host_gather"  # its launch shape is the pool's `groups["host_gather"]` (launch_shapes.py)
PUSH = PushLayout.of("uint64_t segments", "uint64_t dst", "uint64_t ids", "uint64_t base", "uint64_t n",
                     "uint64_t start", "uint R", "uint shift")  # host_gather.comp's Params


def segment_bytes(pool: DevicePool) -> int:
    """The bytes of a table one import covers: `kept.SEGMENT` (1 GiB), or the largest power of two
    that, rounded out to whole pages, fits the device's maxMemoryAllocationSize."""
    imports = pool.allocator.imports
    limit = imports.max_allocation if imports is not None and imports.max_allocation else 0
    if not limit:
        return SEGMENT
    page = imports.page if imports is not None else 4096
    room = max(limit - 2 * page, 16)
    return min(SEGMENT, 1 << (room.bit_length() - 1))


def table_of(source: np.ndarray) -> tuple[np.ndarray, int] | None:
    """`source`'s owner (a dense array numpy allocated) and where `source` starts in its bytes, or
    None where the rows cannot be read in place (another library's memory, a memmap, a strided
    owner, or `source` not inside it)."""
    owner = owner_of(source)
    if owner is None or not (owner.flags.c_contiguous or owner.flags.f_contiguous):
        return None
    start = int(source.__array_interface__["data"][0]) - int(owner.__array_interface__["data"][0])
    if start < 0 or start + source.nbytes > owner.nbytes:
        return None
    return owner, start


def unkept_bytes(pool: DevicePool, source: np.ndarray) -> int:
    """The bytes of `source`'s table segments that a read in place would import now (none kept
    yet): what its first compute pays to pin."""
    found = table_of(source)
    if found is None:
        return source.nbytes
    owner, start = found
    return sum(n for first, n in _segments(pool, owner, start, source.nbytes)
               if not pool.kept.holds(owner, first, n))


def _segments(pool: DevicePool, owner: np.ndarray, start: int, nbytes: int) -> list[tuple[int, int]]:
    """(offset, length) in `owner`'s bytes of each segment covering `nbytes` at `start`."""
    size = segment_bytes(pool)
    first, last = start // size, (start + max(nbytes, 1) - 1) // size
    return [(k * size, min(size, owner.nbytes - k * size)) for k in range(first, last + 1)]


def gather_in_place(pool: DevicePool, source: np.ndarray, positions: np.ndarray,
                    shared: bool = False, checked: bool = False,
                    into: ResidentBlock | None = None) -> ResidentBlock | None:
    """`source[positions]` along axis 0 as a new block in `pool`'s device memory (in a buffer CUDA
    can import with `shared`), or written into `into` (a block of `pool` of the result's shape and
    dtype, reserved by the caller: a `part` of a compute's one result allocation, pinned here while
    the kernel writes it) and returned; read by a kernel from the table's imported pages; None
    where that cannot run (see the module docstring). Out-of-range positions raise IndexError
    naming value and position, unless `checked` says they are in range already (a task's inputs:
    the graph checked the ids when the op was built, or per block of lazy ids, and moved them into
    the source it passes), so the ids are read only to upload them. Counted in `lazyfuel.profile`
    as the result's and the kernel's ids' bytes uploaded."""
    if not source.flags.c_contiguous or source.ndim < 1 or positions.ndim != 1:
        raise ValueError(f"gather_in_place takes a C-contiguous source of rank >= 1 and 1-d positions; "
                         f"got a source of shape {source.shape} (contiguous: {source.flags.c_contiguous}) "
                         f"and positions of shape {positions.shape}")
    if not checked:
        checked_indices(positions, len(source), what="position")
    found = table_of(source)
    if found is None or pool.allocator.imports is None or len(source) > U32_LIMIT:
        return None
    owner, start = found
    row_bytes = math.prod(source.shape[1:]) * source.dtype.itemsize
    shape = (len(positions), *source.shape[1:])
    nbytes = len(positions) * row_bytes
    word = _word(row_bytes, int(owner.__array_interface__["data"][0]) + start)
    if into is not None and (into.pool is not pool or into.shape != shape or into.dtype != source.dtype):
        raise ValueError(f"gather_in_place(into=...) takes a block of {pool.label} of shape {shape} and "
                         f"dtype {source.dtype}; got {into!r}")
    with _TURNS.for_pool(pool).taken() as turn:
        block = into if into is not None else ResidentBlock.reserve(pool, shape, source.dtype, shared=shared)
        target = block.pin() if into is not None else block.allocation  # a reserved block is pinned
        read = False
        try:
            read = not nbytes or _read(pool, owner, start, source, positions, target, row_bytes, word,
                                       turn.give)
        finally:
            if into is not None:
                into.unpin()
            elif read:
                block.done()
            else:
                block.free()
    if not read:
        return None
    ids_bytes = 4 * len(positions) if nbytes else 0
    ran = 1 if nbytes else 0
    profiling.record(bytes_uploaded=nbytes + ids_bytes, submits=ran, dispatches=ran, device=pool.label)
    return block


def _word(row_bytes: int, address: int) -> int:
    """The widest word (16, 8, 4, 2, 1 bytes) dividing a row and the table's first row's address."""
    return next(w for w in (16, 8, 4, 2, 1) if row_bytes % w == 0 and address % w == 0)


def _read(pool: DevicePool, owner: np.ndarray, start: int, source: np.ndarray, positions: np.ndarray,
          target: Allocation, row_bytes: int, word: int, submitted: Callable[[], None]) -> bool:
    """Record and run the one dispatch over every position, calling `submitted` once it is
    submitted (before its fence is waited on); False where a segment could not be imported."""
    segments = _segments(pool, owner, start, source.nbytes)
    size = segment_bytes(pool)
    with pool.batch() as batch:
        addresses = []
        for first, n in segments:
            held = pool.kept.hold(batch, owner, first, n)
            if held is None:
                return False
            addresses.append(held.address)
        ids_bytes = -(-len(positions) // 4) * 16  # uint32 ids, the segments' table after them 16-aligned
        packed = np.empty(ids_bytes + 8 * len(addresses), dtype=np.uint8)
        ids = packed[:ids_bytes].view(np.uint32)
        ids[:len(positions)] = positions  # one pass over the ids: narrowed as they are packed
        ids[len(positions):] = 0
        packed[ids_bytes:].view(np.uint64)[:] = addresses
        small = batch.alloc(packed.nbytes)
        batch.upload(small, packed)
        words_per_row = row_bytes // word
        n = len(positions) * words_per_row
        wide = n >= U32_LIMIT
        pipeline = pool.pipelines.get(f"{FAMILY}_w{word}", spec_constants(batch, FAMILY, wide))
        values = PUSH.values(segments=small.address + ids.nbytes, dst=target.address, ids=small.address,
                             base=0, n=n, start=start - segments[0][0], R=words_per_row,
                             shift=size.bit_length() - 1)
        dispatch(batch, pipeline, PUSH, values, n, per_group(batch, FAMILY))
        batch.start()
        submitted()
        batch.finish()
    return True


class SubmitTurn:
    """One thread at a time readies and submits a read of `pool` (`taken`); the others wait for
    their turn off the GIL. A compute's reads (W2: 4 tasks on 4 threads) readied all at once
    shared the GIL, each Python step of one waiting on the others': on the H200 the first read
    was submitted 5.6 ms into the compute, the last at 6.5, while the device, which reads them
    one after another over the link anyway, waited. In turns the first goes up as soon as it is
    ready alone, and each later one while the earlier ones' kernels run."""

    def __init__(self, pool: DevicePool) -> None:
        self.pool, self._lock = pool, threading.Lock()

    @contextmanager
    def taken(self) -> Iterator[_Turn]:
        """This thread's turn, given back by `give()` (once the read is submitted) or on exit."""
        turn = _Turn(self._lock)
        try:
            yield turn
        finally:
            turn.give()


class _Turn:
    """A held `SubmitTurn`: `give()` releases it (once; later calls do nothing)."""

    def __init__(self, lock: threading.Lock) -> None:
        lock.acquire()
        self._lock: threading.Lock | None = lock

    def give(self) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()


_TURNS = PerPool(SubmitTurn)


class StreamedTables:
    """The tables a block was streamed from, each kept until its owner goes
    (`base.RowReader.streamed_before`): a table streamed once and asked for again is imported and
    read in place from then on, as `kept.KeptImports` keeps a pageable array's pages from the
    second time it is seen (decision 116). Renting by the measured loss (decision 115: what
    streaming took over the read in place) bought W2's 4-6 GiB import only on the 5th-8th compute
    on the H200, each streamed compute 41-48 ms against 35 read in place; the import costs
    ~150-250 ms once. Keyed by the owner's data pointer and size."""

    def __init__(self, pool: DevicePool) -> None:
        self.pool = pool
        self._seen: dict[tuple[int, int], weakref.ref] = {}  # (owner data, owner bytes) -> the owner
        self._lock = threading.Lock()

    def seen(self, source: np.ndarray, mark: bool = False) -> bool:
        """Whether a block of `source`'s table was streamed before (a table of no owner that can be
        kept: never); with `mark`, one was just now."""
        found = table_of(source)
        if found is None:
            return False
        owner = found[0]
        key = (int(owner.__array_interface__["data"][0]), owner.nbytes)
        with self._lock:
            ref = self._seen.get(key)
            before = ref is not None and ref() is owner
            if mark and not before:
                self._seen[key] = weakref.ref(owner, lambda _, k=key: self._forget(k))
        return before

    def _forget(self, key: tuple[int, int]) -> None:
        with self._lock:
            found = self._seen.get(key)
            if found is not None and found() is None:
                del self._seen[key]


_STREAMED = PerPool(StreamedTables)


def streamed_of(pool: DevicePool) -> StreamedTables:
    """The tables `pool` streamed blocks from (made on first use)."""
    return _STREAMED.for_pool(pool)
