"""`lazyfuel.DeviceArray`: a compute's result left in a Vulkan pool's memory (`compute(device=True)`).

A chunked result is assembled on the device in one allocation (C order), so the consumer sees one
array, as torch and CuPy users expect: `assemble(blocks, chunks, dtype, pool)` copies every
resident block's rows into it with device copies (one batch; each contiguous run by the copy
shader where the device moves it faster so, else vkCmdCopyBuffer: `copy_kernels.copy_bytes`; a
result of one block on that pool is that block, no copy; where the graph reserved the result's
allocation before its tasks ran, `graph/placed.py`, the blocks they wrote in place are not copied
at all: `assemble(..., into=)`). A block on another pool comes device
to device where a path exists (`ResidentBlock.bind`, `peer.py`), else through host memory (both
counted in `lazyfuel.profile`).

The memory is a `residency.ResidentBlock` pinned for the DeviceArray's life (never spilled), so it
counts against the pool's `device_memory_budget`. It is freed when the DeviceArray and every
array made from it are gone: each DLPack capsule (`lazyfuel.dlpack.capsule`) keeps the DeviceArray
alive until its consumer calls the capsule's deleter (or, never consumed or refused, until it
dies); no Python code of ours runs as a capsule or its tensor is freed (the capsule is numpy's, see
`lazyfuel.dlpack`), so a consumer that drops a refused capsule with its error set (numpy given a
CUDA capsule) raises its own error.

Hand-off, by where the memory lives (`shared.hand_off(pool)`, the `hand_off` property):
- host-visible, host-coherent device memory (lavapipe, integrated GPUs: `allocator.direct`):
  `__dlpack_device__` is (kDLCPU, 0) and `__dlpack__` exports the mapped memory itself, so
  `np.from_dlpack(r)` (and `torch.from_dlpack(r)` on CPU) is zero-copy and shares it;
- device-local memory on a GPU CUDA shares (same deviceUUID, VK_KHR_external_memory_fd): the
  result lies in an exportable buffer (`shared.SharedBuffer`; a one-block result is the block the
  program wrote, `compute(device=True)` reserving it so, else the assembly's one allocation), which
  CUDA imports once, on the first CUDA consumer. `__dlpack_device__` is (kDLCUDA, CUDA device),
  `__dlpack__(stream=...)` a kDLCUDA capsule (`lazyfuel.dlpack`) and `__cuda_array_interface__`
  version 3 with `stream` None: the Vulkan work finished (the batch waited on its fence) before
  `compute` returned, so no consumer stream waits for anything. `torch.from_dlpack(r)` and
  `cupy.asarray(r)` see the same memory with no copy; each capsule and CuPy array keeps the
  DeviceArray (and so the memory, pinned, and CUDA's mapping) alive until its consumer lets go;
- device-local memory elsewhere: `__dlpack_device__` is (kDLVulkan, physical index) and
  `__dlpack__` raises BufferError (no consumer reads Vulkan DLPack), naming why there is no CUDA.
`__dlpack__(dl_device=(kDLCPU, 0))` of memory the CPU cannot read in place, and `copy=True` where
it can, export a host copy (flagged IS_COPIED in a versioned capsule; `np.from_dlpack(r,
device="cpu")` asks for it); `copy=False` there is a BufferError naming why, and so are other
devices and copies on CUDA (copy with the consumer). `np.asarray(r)` and `r.to_host()` always copy
to host memory.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import product
from typing import Any

import numpy as np

from lazyfuel import dlpack
from lazyfuel.backends.vulkan.copy_kernels import copy_bytes
from lazyfuel.backends.vulkan.pool import DevicePool
from lazyfuel.backends.vulkan.residency import CArrayMeta, ResidentBlock
from lazyfuel.backends.vulkan.shared import CUDA, HOST, NONE, HandOff, cuda_may_import, hand_off


class DeviceArray(CArrayMeta):
    """A C-contiguous array in a Vulkan pool's memory; see the module docstring."""

    # What a hand-off asks, found once, on first use (`_find`; a compute asks none of it): none of
    # it changes while the array lives, its block pinned (never spilled: the memory, its mapping
    # and exportable buffer stay) and the CUDA device asked once a process. `torch.from_dlpack(r)`
    # asks the device twice and the address once (`__dlpack_device__`, then `__dlpack__`).
    _hand_off: HandOff | None = None
    _device_pair: tuple[int, int] | None = None
    _address: int | None = None  # the memory's address on `__dlpack_device__()` (`_pointer`)

    def __init__(self, block: ResidentBlock) -> None:
        """Hold `block` (pinned here until this array and its exports are gone)."""
        block.pin_while(self)
        self._block = block
        self.shape, self.dtype = block.shape, block.dtype

    @property
    def pool(self) -> DevicePool:
        return self._block.pool

    @property
    def device(self) -> str:
        """The Vulkan device (pool label) holding the memory."""
        return self.pool.label

    @property
    def host_visible(self) -> bool:
        """Whether the CPU can read the memory in place (lavapipe, integrated GPUs)."""
        return self._block.allocation.host is not None

    @property
    def hand_off(self) -> HandOff:
        """How the memory reaches other libraries (`shared.HandOff`: host, cuda or none, and why);
        CUDA only where the memory is an exportable buffer. Found once (see the class's fields)."""
        found = self._hand_off
        return self._find() if found is None else found

    def __dlpack_device__(self) -> tuple[int, int]:
        """The DLPack (device type, number) pair of the memory, by `hand_off`: (kDLCPU, 0),
        (kDLCUDA, CUDA device) or (kDLVulkan, physical index). Found once."""
        pair = self._device_pair
        if pair is None:
            self._find()
            pair = self._device_pair
        return pair

    def _find(self) -> HandOff:
        """Work out `hand_off` and the DLPack device pair and keep them; the hand-off."""
        if self.host_visible:
            found, pair = _HOST, (dlpack.CPU, 0)
        else:
            found = hand_off(self.pool)
            if found.kind == CUDA and self._block.shared_buffer is None:
                found = _NOT_EXPORTABLE
            if found.kind == CUDA:
                pair = (dlpack.CUDA, int(found.cuda_device))
            else:
                pair = (dlpack.VULKAN, self.pool.info.index)
        self._device_pair, self._hand_off = pair, found
        return found

    def __dlpack__(self, *, stream: int | Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
        """A DLPack capsule (see the module docstring), as the array API standard says: on
        `__dlpack_device__()` (or `dl_device` equal to it) over the memory itself, unless
        `copy=True`; on `dl_device=(kDLCPU, 0)` from memory the CPU cannot read in place, a host
        copy unless `copy=False` (BufferError). A copy is a host copy (flagged IS_COPIED in a
        versioned capsule); other devices, and a copy on CUDA, are BufferErrors naming what would
        be accepted. `stream` may be any stream of the consumer: the memory is ready, so none waits."""
        if stream is not None and not isinstance(stream, int):
            raise TypeError(f"__dlpack__(stream=...) takes a stream handle (an int) or None, got "
                            f"{type(stream).__name__}")
        here = self.__dlpack_device__()
        there = here if dl_device is None else _device_pair(dl_device)
        if there == (dlpack.CPU, 0) and (here != there or copy):
            if copy is False:
                raise BufferError(f"this DeviceArray lives in device-local memory of {self.device} "
                                  f"(DLPack device {here}), which the CPU does not read in place: "
                                  "a CPU export needs a copy, and copy=False forbids one (pass "
                                  "copy=True or None, or use np.asarray(r))")
            host = self.to_host()
            return dlpack.capsule(host.ctypes.data, host.shape, host.dtype, there, keep=host,
                                  max_version=max_version, copied=True)
        if there != here:
            accepted = {dlpack.CPU: "(1, 0)", dlpack.CUDA: f"{here} in place or to (1, 0) as a host copy"}
            raise BufferError(f"this DeviceArray is on DLPack device {here}: it exports to "
                              f"{accepted.get(here[0], '(1, 0) as a host copy')}, not to {there}")
        if copy and here[0] == dlpack.CUDA:
            raise BufferError("a DeviceArray copies to host memory only: pass dl_device=(1, 0) "
                              "for a host copy, or take the CUDA memory in place (copy=None) and "
                              "copy it with the consumer")
        # in place (on Vulkan memory no consumer reads, `_pointer`'s BufferError says why)
        return dlpack.capsule(self._pointer(here), self.shape, self.dtype, here, keep=self,
                              max_version=max_version)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """CUDA's array interface (version 3) where the memory is shared with CUDA, else
        AttributeError (so `hasattr` says False there)."""
        found = self.hand_off
        if found.kind != CUDA:
            raise AttributeError(f"this DeviceArray is not in memory CUDA shares ({found.why})")
        return {"shape": self.shape, "typestr": self.dtype.str, "descr": [("", self.dtype.str)],
                "data": (self._pointer((dlpack.CUDA, int(found.cuda_device))), False),
                "strides": None, "version": 3, "stream": None}

    def _pointer(self, device: tuple[int, int]) -> int:
        """The address of the memory on DLPack `device` (`__dlpack_device__()`): the mapped host
        address, or CUDA's (imported the first time); found once; BufferError where there is
        neither."""
        address = self._address
        if address is None:
            if device[0] == dlpack.CPU:
                address = int(self._block.allocation.host.__array_interface__["data"][0])
            else:
                buffer = self._block.shared_buffer
                if device[0] != dlpack.CUDA or buffer is None:
                    raise BufferError(f"this DeviceArray lives in device-local memory of {self.device}, "
                                      f"which no DLPack consumer reads in place ({self.hand_off.why}); "
                                      "use np.asarray(r) or r.to_host() for a host copy")
                address = buffer.cuda_pointer(device[1])
            self._address = address
        return address

    def to_host(self) -> np.ndarray:
        """A host copy."""
        return np.asarray(self._block)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        out = self.to_host()
        return out if dtype is None else out.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return f"lazyfuel.DeviceArray(shape={self.shape}, dtype={self.dtype}, device={self.device!r})"


_HOST = HandOff(HOST, None, "the memory is host-visible: a CPU DLPack over it")
_NOT_EXPORTABLE = HandOff(NONE, None, "the memory is not exportable (it was not reserved for CUDA)")


def _device_pair(dl_device: Any) -> tuple[int, int]:
    """`__dlpack__`'s `dl_device` as a (device type, number) pair; TypeError for anything else."""
    try:
        kind, number = dl_device
        return (int(kind), int(number))
    except (TypeError, ValueError):
        raise TypeError(f"__dlpack__(dl_device=...) takes a (device type, device number) pair, "
                        f"got {dl_device!r}") from None


def assemble(blocks: Sequence[Any], chunks: tuple[tuple[int, ...], ...], dtype: Any,
             pool: DevicePool | None = None, into: ResidentBlock | None = None) -> DeviceArray:
    """One DeviceArray of the whole result from its blocks (row-major over `chunks`) on `pool`
    (default: the first resident block's): resident blocks copied into one allocation by device
    copies (another pool's moved first, `ResidentBlock.bind`; exportable where the pool hands off
    to CUDA; a one-block result on `pool` already so is that block); host blocks (numpy, or blocks
    of a pool with no path to `pool`) uploaded into place. With `into` (a whole block of `pool` of
    the result's shape and dtype, which the caller reserved and unpins: `VulkanExecutor.result_block`)
    the allocation is `into`, and a block that is its `part` at the block's place (a task wrote it
    there: `host_gather.gather_in_place(into=)`) is not copied: where every block is, nothing is."""
    shape = tuple(sum(c) for c in chunks)
    dtype = np.dtype(dtype)
    first = next((b for b in blocks if isinstance(b, ResidentBlock)), into)
    if first is None:
        raise ValueError("assemble() needs at least one resident block")
    pool = first.pool if pool is None else pool
    if into is not None and (into.pool is not pool or into.shape != shape or into.dtype != dtype
                             or not into.whole):
        raise ValueError(f"assemble(into=...) takes a whole block of {pool.label} of shape {shape} and "
                         f"dtype {dtype}; got {into!r}")
    cuda = cuda_may_import(pool)
    if into is None and len(blocks) == 1 and first.shape == shape and first.pool is pool \
            and (first.shared_buffer is not None or not cuda):
        return DeviceArray(first)
    whole = into if into is not None else ResidentBlock.reserve(pool, shape, dtype, shared=cuda)
    try:
        _copy_in(whole, blocks, chunks)
    except BaseException:
        if into is None:
            whole.free()
        raise
    array = DeviceArray(whole)
    if into is None:
        whole.done()
    return array


def _copy_in(whole: ResidentBlock, blocks: Sequence[Any], chunks: tuple[tuple[int, ...], ...]) -> None:
    """Copy each of `blocks` (row-major over `chunks`) into its place in `whole` (pinned) in one
    batch, but those lying there already (`ResidentBlock.lies_in`); no batch where none is left."""
    pool, dtype, shape = whole.pool, whole.dtype, whole.shape
    starts = [np.concatenate(([0], np.cumsum(c)))[:-1] for c in chunks]
    todo = []
    for block, where in zip(blocks, product(*(range(len(c)) for c in chunks))):
        origin = tuple(int(s[i]) for s, i in zip(starts, where))
        runs = _runs(tuple(block.shape), origin, shape, dtype.itemsize)
        placed = isinstance(block, ResidentBlock) and len(runs) == 1 and block.lies_in(whole, runs[0][1])
        if runs and not placed:
            todo.append((block, runs))
    if not todo:
        return
    with pool.batch() as batch:
        for block, runs in todo:
            src = block.bind(batch) if isinstance(block, ResidentBlock) else None
            if src is None:  # a host block (or another pool's): through host memory
                host = np.asarray(block, dtype, order="C")
                src = batch.alloc(max(host.nbytes, 1))
                batch.upload(src, host.reshape(-1).view(np.uint8))
            for src_off, dst_off, n in runs:
                copy_bytes(batch, src, src_off, whole.allocation, dst_off, n)
        batch.barrier()
        batch.run()


def _runs(block: tuple[int, ...], origin: tuple[int, ...], shape: tuple[int, ...],
          itemsize: int) -> list[tuple[int, int, int]]:
    """(source offset, destination offset, bytes) of each contiguous run of a C-order block of
    shape `block` placed at `origin` in a C-order array of `shape`."""
    if math.prod(block) == 0:
        return []
    if not block:
        return [(0, 0, itemsize)]
    d = len(block) - 1  # the runs span axis d and the trailing axes the block covers whole
    while d > 0 and block[d] == shape[d]:
        d -= 1
    inner = math.prod(block[d:]) * itemsize
    strides = [math.prod(shape[k + 1:]) * itemsize for k in range(len(shape))]
    runs = []
    for n, idx in enumerate(np.ndindex(*block[:d])):
        dst = sum((o + i) * s for o, i, s in zip(origin, idx, strides))
        dst += origin[d] * strides[d]
        runs.append((n * inner, dst, inner))
    return runs
