"""`lazyfuel.DeviceArray`: a compute's result left in a Vulkan pool's memory (`compute(device=True)`).

A chunked result is assembled on the device in one allocation (C order), so the consumer sees one
array, as torch and CuPy users expect: `assemble(blocks, chunks, dtype, pool)` copies every
resident block's rows into it with device copies (one batch; a result of one block on that pool
is that block, no copy). A block on another pool comes device to device where a path exists
(`ResidentBlock.bind`, `peer.py`), else through host memory (both counted in `lazyfuel.profile`).

The memory is a `residency.ResidentBlock` pinned for the DeviceArray's life (never spilled), so it
counts against the pool's `device_memory_budget`. It is freed when the DeviceArray and every
array made from it are gone: the host view the DLPack export comes from keeps the DeviceArray
alive (`layout._Holder`), and numpy's DLPack capsule holds that view until its consumer lets go.

Hand-off, by where the memory lives:
- host-visible, host-coherent device memory (lavapipe, integrated GPUs: `allocator.direct`):
  `__dlpack_device__` is (kDLCPU, 0) and `__dlpack__` exports the mapped memory itself, so
  `np.from_dlpack(r)` (and `torch.from_dlpack(r)` on CPU) is zero-copy and shares it;
- device-local memory (discrete GPUs): `__dlpack_device__` is (kDLVulkan, physical index) and
  `__dlpack__` raises BufferError (no consumer reads Vulkan DLPack); `cuda()` is the seam where a
  CUDA importer on the same GPU would map exported memory (as `graph.crossing` does for the FFT):
  not implemented, NotImplementedError naming the device. Unverified on a GPU.
`np.asarray(r)` and `r.to_host()` always copy to host memory.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import product
from typing import Any

import numpy as np

from lazyfuel.backends.vulkan.pool import DevicePool
from lazyfuel.backends.vulkan.residency import CArrayMeta, ResidentBlock
from lazyfuel.layout import _Holder

DL_CPU, DL_VULKAN = 1, 7  # DLPack device types (dlpack.h: kDLCPU, kDLVulkan)


class DeviceArray(CArrayMeta):
    """A C-contiguous array in a Vulkan pool's memory; see the module docstring."""

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

    def __dlpack_device__(self) -> tuple[int, int]:
        if self.host_visible:
            return (DL_CPU, 0)
        return (DL_VULKAN, self.pool.info.index)

    def __dlpack__(self, **kwargs: Any) -> Any:
        """A DLPack capsule over the memory itself (host-visible memory only; see the module
        docstring); keyword arguments as numpy's `ndarray.__dlpack__`."""
        return self._view().__dlpack__(**kwargs)

    def _view(self) -> np.ndarray:
        """A numpy array over the memory itself that keeps this DeviceArray alive."""
        host = self._block.allocation.host
        if host is None:
            raise BufferError(f"this DeviceArray lives in device-local memory of {self.device}, which "
                              "the CPU cannot read in place; use np.asarray(r) or r.to_host() for a host "
                              "copy")
        address = int(host.__array_interface__["data"][0])
        flat = np.asarray(_Holder(address, max(self.nbytes, 1), readonly=False, keep=self))
        return flat[:self.nbytes].view(self.dtype).reshape(self.shape)

    def to_host(self) -> np.ndarray:
        """A host copy."""
        return np.asarray(self._block)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        out = self.to_host()
        return out if dtype is None else out.astype(dtype, copy=False)

    def cuda(self) -> Any:
        """The seam for a CUDA consumer on the same GPU (Vulkan external memory imported by CUDA,
        as `graph.crossing` hands FFT inputs over): not implemented yet."""
        raise NotImplementedError(f"handing a DeviceArray on {self.device} to CUDA is not implemented "
                                  "(it needs the memory allocated exportable and imported by CUDA, as "
                                  "graph/crossing.py does); use np.asarray(r)")

    def __repr__(self) -> str:
        return f"lazyfuel.DeviceArray(shape={self.shape}, dtype={self.dtype}, device={self.device!r})"


def assemble(blocks: Sequence[Any], chunks: tuple[tuple[int, ...], ...], dtype: Any,
             pool: DevicePool | None = None) -> DeviceArray:
    """One DeviceArray of the whole result from its blocks (row-major over `chunks`) on `pool`
    (default: the first resident block's): resident blocks copied into one allocation by device
    copies (another pool's moved first, `ResidentBlock.bind`); host blocks (numpy, or blocks of
    a pool with no path to `pool`) uploaded into place."""
    shape = tuple(sum(c) for c in chunks)
    dtype = np.dtype(dtype)
    first = next((b for b in blocks if isinstance(b, ResidentBlock)), None)
    if first is None:
        raise ValueError("assemble() needs at least one resident block")
    pool = first.pool if pool is None else pool
    if len(blocks) == 1 and first.shape == shape and first.pool is pool:
        return DeviceArray(first)
    whole = ResidentBlock.reserve(pool, shape, dtype)
    try:
        starts = [np.concatenate(([0], np.cumsum(c)))[:-1] for c in chunks]
        with pool.batch() as batch:
            for block, where in zip(blocks, product(*(range(len(c)) for c in chunks))):
                origin = tuple(int(s[i]) for s, i in zip(starts, where))
                src = block.bind(batch) if isinstance(block, ResidentBlock) else None
                if src is None:  # a host block (or another pool's): through host memory
                    host = np.asarray(block, dtype, order="C")
                    src = batch.alloc(max(host.nbytes, 1))
                    batch.upload(src, host.reshape(-1).view(np.uint8))
                for src_off, dst_off, n in _runs(tuple(block.shape), origin, shape, dtype.itemsize):
                    batch.copy(src, src_off, whole.allocation, dst_off, n)
            batch.barrier()
            batch.run()
    except BaseException:
        whole.free()
        raise
    array = DeviceArray(whole)
    whole.done()
    return array


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
