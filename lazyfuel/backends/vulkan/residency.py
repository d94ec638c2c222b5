"""Blocks kept in a pool's device memory between computes (`Array.persist(device=True)`).

A `ResidentBlock` is a small handle (shape, dtype, pool) over one C-contiguous block held in the
device memory of the pool that computed it: the object a persisted dask graph holds in place of a
numpy chunk. The Vulkan executor binds a resident block of its own pool as a program input where
it lies (`bind`: no upload), and one of another pool device to device where a path exists
(`peer.py`: exported memory between pools of one GPU); anything else reads it through
`np.asarray(block)`, which downloads a copy (counted as downloaded bytes in `lazyfuel.profile`).
`home` is (Vulkan, the pool's number among the pools blocks are spread over), which the graph
layer runs a program's work by (`graph.task.home_device`).

Each pool has one `ResidentStore` (`resident_store.py`, `store_of(pool)`) keeping its blocks under a budget,
`lazyfuel.config.device_memory_budget` (a fraction of the device heap, default 0.8, or bytes),
read whenever a block needs room. Making room spills the least recently used blocks that no
batch is reading (not pinned) to host memory; a spilled block comes back to the device when it is
next bound (both moves counted in `lazyfuel.profile`'s bytes per direction). A MemoryError
(naming the sizes) only for a block larger than the whole budget, or where the device is full
even after every unpinned block has spilled; blocks pinned by running work may push the store
over its budget for as long as they run.

A block reserved `shared` lies in an exportable buffer CUDA can import (`shared.py`: a
`compute(device=True)` result handed to torch or CuPy, a copy of a CUDA tensor); its memory goes
back to the pool's shared buffers, and if it spills it comes back in ordinary memory.

Each block is freed into the allocator it came from (the pool's allocator when it was placed:
`transfer.in_mode` swaps allocators for tests; blocks must not outlive such a block).

A block's memory goes back to the pool when the handle goes (`weakref.finalize`): the store holds
the block's state (`_Slot`), never the handle, so dropping the last Array (and with it the dask
graph holding the handle) frees it; `allocator.in_use` shows it. Pickling a handle (a dask worker
moving it) sends its bytes as a numpy array: device memory does not travel.
"""

from __future__ import annotations

import math
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from lazyfuel import profiling
from lazyfuel.backends.vulkan.memory import Allocation
from lazyfuel.backends.vulkan.resident_store import _STORES, ResidentStore, _Slot, store_of  # noqa: F401
from lazyfuel.backends.vulkan.shared import SharedBuffer
from lazyfuel.contracts.model import Backend
from lazyfuel.layout import Layout

if TYPE_CHECKING:
    from lazyfuel.backends.vulkan.batch import Batch
    from lazyfuel.backends.vulkan.pool import DevicePool


class CArrayMeta:
    """`ndim`, `size`, `nbytes` and C-contiguous `strides` (bytes) from `shape` and `dtype`: what a
    device-side array shows the planner and users in numpy's terms."""

    shape: tuple[int, ...]
    dtype: np.dtype

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))
    nbytes = property(lambda self: self.size * self.dtype.itemsize)

    @property
    def strides(self) -> tuple[int, ...]:
        """C-contiguous strides in bytes, as numpy gives them."""
        return tuple(math.prod(self.shape[k + 1:]) * self.dtype.itemsize for k in range(self.ndim))


class ResidentBlock(CArrayMeta):
    """A C-contiguous block of `shape` and `dtype` held by `pool`'s `ResidentStore`; see the module
    docstring. Looks enough like an array for the planner (`shape`, `dtype`, `strides`, `size`)."""

    __lazyfuel_device_block__ = Backend.Vulkan  # `backends.base.is_device_block`, `block_backend`

    _at = 0  # where this block's bytes start in its slot's (a part of another block: `part`)
    _base: ResidentBlock | None = None  # the block whose memory this one views (kept alive)

    def __init__(self, pool: DevicePool, shape: tuple[int, ...], dtype: np.dtype, slot: _Slot) -> None:
        self.pool, self.shape, self.dtype = pool, tuple(int(n) for n in shape), np.dtype(dtype)
        self._store, self._slot = store_of(pool), slot
        self._finalizer = weakref.finalize(self, self._store.drop, slot)

    @classmethod
    def reserve(cls, pool: DevicePool, shape: tuple[int, ...], dtype: Any,
                shared: bool = False) -> ResidentBlock:
        """A new block on `pool`, its bytes unset and pinned (call `done()` once written); in a
        buffer CUDA can import with `shared` (see `shared_buffer`)."""
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize
        return cls(pool, shape, np.dtype(dtype), store_of(pool).reserve(nbytes, shared))

    @classmethod
    def upload(cls, pool: DevicePool, array: np.ndarray) -> ResidentBlock:
        """`array`'s values as a new block on `pool` (one copy, counted as uploaded bytes)."""
        a = np.asarray(array, order="C")  # (ascontiguousarray makes a 0-d array 1-d)
        block = cls.reserve(pool, a.shape, a.dtype)
        try:
            with pool.batch() as batch:
                batch.upload(block.allocation, a.reshape(-1).view(np.uint8))
                batch.run()
            profiling.record(bytes_uploaded=a.nbytes, device=pool.label)
        finally:
            block.done()
        return block

    @property
    def allocation(self) -> Allocation:
        """The device memory now (only while pinned: a reserved block, or inside `bind`'s batch)."""
        assert self._slot.allocation is not None and self._slot.pins, "pin the block first"
        return self._mine(self._slot.allocation)

    def _mine(self, allocation: Allocation) -> Allocation:
        """The slot's memory `allocation` narrowed to this block's bytes (a part's range)."""
        if self.whole:
            return allocation
        return allocation.part(self._at, self.nbytes)

    @property
    def whole(self) -> bool:
        """Whether this block covers its memory whole (not a `part` of a larger block)."""
        return self._at == 0 and self.nbytes == self._slot.nbytes

    @property
    def shared_buffer(self) -> SharedBuffer | None:
        """The exportable buffer (`shared.SharedBuffer`) the block lies in, or None (ordinary
        memory, spilled: a shared block that spilled comes back in ordinary memory, or a `part`:
        only the whole buffer is exported)."""
        return self._slot.shared if self.whole else None

    @property
    def spilled(self) -> bool:
        """Whether the bytes are in host memory now (spilled under the budget)."""
        return self._slot.allocation is None and not self._slot.freed

    @property
    def freed(self) -> bool:
        """Whether the memory went back (`free()`): the block holds no bytes any more."""
        return self._slot.freed

    @property
    def spills(self) -> int:
        """How many times this block was spilled to host memory."""
        return self._slot.spills

    def done(self) -> None:
        """Unpin a reserved block once its bytes are written (the store back under its budget)."""
        self._store.settle(self._slot)

    @property
    def home(self) -> tuple[Backend, int | None]:
        """(Vulkan, the number of this block's pool among the pools blocks are spread over, None
        where it is none of them): `backends.base.block_home`. Remembered with the spread it was
        found in (`pool.spread_tuple`, one object while the device list and knobs stay): asked
        several times per block and task, it is looked up again only once the spread changed."""
        from lazyfuel.backends.vulkan.pool import spread_tuple

        slots = spread_tuple()
        known = getattr(self, "_home", None)
        if known is not None and known[0] is slots:
            return known[1]
        slot = (self.pool.info.index, self.pool.replica)
        found = (Backend.Vulkan, slots.index(slot) if slot in slots else None)
        self._home = (slots, found)
        return found

    def reach(self, other: object) -> str:
        """How this block's bytes reach the kernels of `other`'s pool (another device block), in
        `lf.explain`'s words (`peer.describe`)."""
        from lazyfuel.backends.vulkan import peer

        if not isinstance(other, ResidentBlock):
            return "through host memory (the other block is not a Vulkan resident block)"
        return peer.describe(self.pool, other.pool)

    def bind(self, batch: Batch) -> Allocation | None:
        """The block's device memory for the kernels of `batch`, pinned (and brought back if
        spilled) until the batch closes; for a batch of another pool, a copy moved there device to
        device (`peer.bind`), or None where no such path exists (the caller takes a host copy)."""
        if batch.pool is not self.pool:
            from lazyfuel.backends.vulkan import peer

            return peer.bind(self, batch)
        allocation = self._store.touch(self._slot)
        batch.after_close(lambda: self._store.release(self._slot), keep=self)
        return self._mine(allocation)

    def reshape(self, shape: tuple[int, ...]) -> ResidentBlock:
        """The same bytes in another C-order `shape` of as many elements: a handle that keeps this
        one alive (its memory is freed with this one). ValueError for another size."""
        shape = tuple(int(n) for n in shape)
        if math.prod(shape) != self.size:
            raise ValueError(f"cannot see a resident block of shape {self.shape} as shape {shape}")
        return self.part(0, shape)

    def part(self, offset: int, shape: tuple[int, ...]) -> ResidentBlock:
        """The C-order block of `shape` whose bytes start `offset` bytes into this one's: a handle
        over the same memory (no copy) that keeps this block alive; freeing it (or dropping it)
        frees nothing, the memory goes with the last handle over it. Pinning, binding and
        spilling are this block's (one allocation). ValueError for a range past this block."""
        shape = tuple(int(n) for n in shape)
        nbytes = math.prod(shape) * self.dtype.itemsize
        if offset < 0 or offset % self.dtype.itemsize or offset + nbytes > self.nbytes:
            raise ValueError(f"a part of shape {shape} at byte {offset} does not lie inside a resident "
                             f"block of shape {self.shape} and dtype {self.dtype} ({self.nbytes} bytes, "
                             f"parts at multiples of {self.dtype.itemsize} bytes)")
        view = ResidentBlock.__new__(ResidentBlock)
        view.pool, view.shape, view.dtype = self.pool, shape, self.dtype
        view._store, view._slot, view._base, view._at = self._store, self._slot, self, self._at + offset
        view._finalizer = weakref.finalize(view, lambda: None)  # the base frees the memory
        return view

    def lies_in(self, other: ResidentBlock, offset: int) -> bool:
        """Whether this block's bytes are `other`'s from byte `offset` on (a `part` placed there)."""
        return self._slot is other._slot and self._at == other._at + offset

    def viewed(self, layout: Layout) -> ResidentView | None:
        """The block seen through `layout` (in elements, relative to the block's first element: a
        broadcast or a transpose of it), bound where the block lies; None where the view does not
        start at the block's lowest address (a reversed or offset slice: the caller takes a host
        copy) or reaches past its end."""
        lowest = -sum(min(0, (n - 1) * st) for n, st in zip(layout.shape, layout.strides))
        if layout.size == 0 or layout.offset != lowest:  # Layout.of's offset: the first element lowest
            return None
        if layout.span > self.size:
            return None
        return ResidentView(self, layout)

    def pin(self) -> Allocation:
        """Pin the block on its pool's device (brought back if spilled); its memory until `unpin`."""
        return self._mine(self._store.touch(self._slot))

    def unpin(self) -> None:
        """Undo one `pin`."""
        self._store.release(self._slot)

    def pin_while(self, owner: object) -> None:
        """Keep the block on the device (never spilled) for as long as `owner` lives."""
        self._store.touch(self._slot)
        weakref.finalize(owner, self._store.release, self._slot)

    def free(self) -> None:
        """Give the memory back now (no work may still read it)."""
        self._finalizer()

    # -- host copies ----------------------------------------------------------------------------
    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        out = np.empty(self.shape, self.dtype)
        if out.nbytes and self._store.read(self._slot, out, self._at):
            profiling.record(bytes_downloaded=out.nbytes)
        return out if dtype is None else out.astype(dtype, copy=False)

    def __getitem__(self, key: Any) -> np.ndarray:
        """A host copy's `key` (what splitting a block in halves reads)."""
        return np.asarray(self)[key]

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (np.asarray, (self.__array__(),))  # device memory does not travel: the bytes do

    def __repr__(self) -> str:
        where = "spilled to host" if self.spilled else "on the device"
        return f"ResidentBlock(shape={self.shape}, dtype={self.dtype}, {self.pool.label}, {where})"


class ResidentView(CArrayMeta):
    """A view (`layout`, in elements from the block's first) of a `ResidentBlock`: what a task's
    program input is where it reads a resident block through a broadcast or a transpose (a
    persisted (N, 1) mask broadcast to its data's shape). The executor binds the block's memory
    with this layout (`transfer.upload_all`), so the bytes stay where they lie; `np.asarray`
    downloads the block and views it as numpy would. Keeps the block alive."""

    __lazyfuel_device_block__ = Backend.Vulkan

    def __init__(self, block: ResidentBlock, layout: Layout) -> None:
        self.block, self.layout = block, layout
        self.shape, self.dtype, self.pool = layout.shape, block.dtype, block.pool

    @property
    def strides(self) -> tuple[int, ...]:
        """The layout's strides in bytes, as numpy gives them (not C-contiguous ones)."""
        return tuple(s * self.dtype.itemsize for s in self.layout.strides)

    @property
    def home(self) -> tuple[Backend, int | None]:
        return self.block.home

    def reach(self, other: object) -> str:
        return self.block.reach(other)

    def bind(self, batch: Batch) -> Allocation | None:
        """The block's memory for `batch` (`ResidentBlock.bind`), read through `layout`."""
        return self.block.bind(batch)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        base = np.asarray(self.block).reshape(-1)  # the view's first element lies at its offset
        out = np.lib.stride_tricks.as_strided(base[self.layout.offset:], self.shape, self.strides,
                                              writeable=False)
        return out if dtype is None else out.astype(dtype, copy=False)

    def __getitem__(self, key: Any) -> np.ndarray:
        return np.asarray(self)[key]

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (np.asarray, (np.ascontiguousarray(self.__array__()),))

    def __repr__(self) -> str:
        return f"ResidentView({self.layout}, of {self.block!r})"


try:  # dask weighs chunks by sizeof; a resident block weighs its bytes
    from dask.sizeof import sizeof

    sizeof.register(ResidentBlock)(lambda block: block.nbytes)
except ImportError:  # pragma: no cover - dask is a dependency
    pass
