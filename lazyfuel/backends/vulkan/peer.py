"""A resident block read by another pool's work, device to device where a path exists.

Blocks of `persist(device=True)` lie in the pool that made them (`residency.ResidentBlock`). A
program that runs on pool A and needs a block of pool B (a chain mixing blocks of both, a
`compute(device=True)` gathered onto A) reads it through `bind(block, batch)`:

- Exported memory (`export.py`, VK_KHR_external_memory_fd, OPAQUE_FD): B copies the block on its
  own device into one exportable dedicated allocation (vkCmdCopyBuffer, one batch of B, waited
  on), hands out an fd, and A imports it (VkImportMemoryFdInfoKHR) and binds it to its kernels
  where it lies. No byte crosses the host link; `lazyfuel.profile` counts the bytes as
  `bytes_peer`. Both allocations are freed, and the block unpinned, when A's batch closes.
- Otherwise `bind` returns None and the caller takes a host copy (`np.asarray(block)`: a download
  on B, then an upload on A, both counted).

`path(src, dst)` says which: None where the exported path exists, else why not. Opaque-fd memory
can be imported only by a device of the same physical GPU and driver (the Vulkan spec's
compatibility table: deviceUUID and driverUUID must match), so the path exists between pools of
one device (`LAZYFUEL_DEVICES=0,0`, how the tests run it on lavapipe) and never between two GPUs:
there a peer copy would need CUDA (each GPU importing its own pool's exported memory, then
cudaMemcpyPeer over NVLink) or a Vulkan device group, neither built. Between two GPUs blocks cross
through the host, and `lf.explain` says so.

Synchronisation: B's copy is complete (its fence waited) before A records anything that reads
it; the block is pinned on B (never spilled or freed) for the copy only, A reading the copy. No queue
family ownership transfer to VK_QUEUE_FAMILY_EXTERNAL is recorded (as for the CUDA crossing,
decision 36): both devices are the same hardware and the fence orders the work; unverified on a
GPU driver that might keep exclusive buffers' contents per device.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from lazyfuel import profiling
from lazyfuel.backends.vulkan.export import EXTENSION, ExportedMemory, device_uuid, import_fd, supported
from lazyfuel.backends.vulkan.memory import Allocation

if TYPE_CHECKING:
    from lazyfuel.backends.vulkan.batch import Batch
    from lazyfuel.backends.vulkan.pool import DevicePool
    from lazyfuel.backends.vulkan.residency import ResidentBlock

_PATHS: dict[tuple[int, int], tuple[DevicePool, DevicePool, str | None]] = {}
_LOCK = threading.Lock()


def path(src: DevicePool, dst: DevicePool) -> str | None:
    """None where blocks of `src` reach `dst`'s kernels through exported memory; else why not
    (the words `lf.explain` prints). The devices are compared once per pair of pools."""
    if src is dst:
        return None
    key = (id(src), id(dst))
    with _LOCK:
        found = _PATHS.get(key)
    if found is None or found[0] is not src or found[1] is not dst:
        found = (src, dst, _devices_apart(src, dst))
        with _LOCK:
            _PATHS[key] = found
    if found[2] is not None:
        return found[2]
    if src.allocator.direct != dst.allocator.direct:  # the importer must pick the exporter's type
        return f"{src.label} and {dst.label} map device memory differently (their transfer modes differ)"
    return None


def _devices_apart(src: DevicePool, dst: DevicePool) -> str | None:
    """Why the two pools' devices cannot share exported memory, or None."""
    lacking = [p.label for p in (src, dst) if not supported(p)]
    if lacking:
        return f"{' and '.join(lacking)} cannot share memory (no {EXTENSION})"
    if device_uuid(src.physical) != device_uuid(dst.physical):
        return (f"{src.label} and {dst.label} are different GPUs, and exported (opaque fd) memory "
                "imports only on the GPU that made it; a peer copy between GPUs (CUDA's, or a Vulkan "
                "device group) is not built")
    return None


def describe(src: DevicePool, dst: DevicePool) -> str:
    """How a block of `src` reaches `dst`, in `lf.explain`'s words."""
    why = path(src, dst)
    if why is None:
        return "device to device (exported memory)"
    return f"through host memory ({why})"


def bind(block: ResidentBlock, batch: Batch, offset: int = 0, nbytes: int | None = None
         ) -> Allocation | None:
    """`block`'s bytes (a block of another pool than `batch`'s; `nbytes` from byte `offset`, default
    all) bound for `batch`'s kernels, moved device to device (see the module docstring), starting
    at the allocation's first byte; None where no path exists."""
    src, dst = block.pool, batch.pool
    if path(src, dst) is not None or block.spilled:  # a spilled block: its bytes are on the host
        return None
    nbytes = block.nbytes - offset if nbytes is None else nbytes
    # kernels read whole words (up to 16 bytes) past a value's last byte, as every allocation of the
    # pool allows (`memory.size_class`): the buffer must not end inside the last word
    align = max(src.allocator.align, dst.allocator.align)
    exported = ExportedMemory.allocate(src, -(-max(nbytes, 1) // align) * align)
    imported = None
    try:
        allocation = block.pin()
        try:
            with src.batch() as copy:
                copy.copy(allocation, offset, exported.allocation, 0, nbytes)
                copy.run()
        finally:
            block.unpin()
        fd = exported.fd()
        try:
            imported = import_fd(dst, fd, exported.size)  # takes the fd over
        except BaseException:
            os.close(fd)
            raise
    except BaseException:
        exported.free()
        raise
    batch.after_close(lambda: (imported.free(), exported.free()), keep=block)
    profiling.record(bytes_peer=nbytes)
    return imported.allocation
