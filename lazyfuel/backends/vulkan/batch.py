"""A task's work as one command buffer: uploads, dispatches, barriers, downloads; one submit.

    with pool.batch() as batch:
        src = batch.alloc(nbytes); batch.upload(src, host_bytes)
        batch.dispatch(pipeline, fmt, values, base_slot, n_items, items_per_group)
        batch.barrier()
        batch.download(dst, out_array)
        batch.run()          # end, submit once, wait on the fence, copy downloads out

Work that repeats (the same kernel on the same buffers, task after task) is packed once with
`prepare(kernel, step, args, out, status)` and recorded with `replay(items)`, which skips the
kernel's checks and every per-call allocation; `reusable()` before recording lets `run()` submit
the same command buffer again without recording it anew.

`kernels_begin()` / `kernels_end()` around part of the recording (the executor: after the
uploads, before the downloads) make `run()` set `kernel_seconds`, the GPU time between them by
timestamp queries; otherwise it stays None and nothing extra is recorded.

Grids larger than maxComputeWorkGroupCount[0] are split into several dispatches in the same
command buffer: the push-constant value at `base_slot` is the first item of each tile. Buffers
are bound as storage buffers only while every range fits maxStorageBufferRange; kernels with a
larger buffer use the device-address shaders, to which that limit does not apply (kernels.py
chooses). Allocations made through the batch are freed when it closes; the context (command
pool, buffer, fence) goes back to the pool. Every struct a recorded command points to is owned
by the context and outlives the fence wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import vulkan as vk

from lazyfuel import prep_gate
from lazyfuel.backends.vulkan.check import check
from lazyfuel.backends.vulkan.dispatch import Prepared, Recorder
from lazyfuel.backends.vulkan.memory import Allocation
from lazyfuel.backends.vulkan.timestamps import Timestamps
from lazyfuel.hostcopy import copy

if TYPE_CHECKING:
    from lazyfuel.backends.vulkan.pool import DevicePool


class Context:
    """A command pool, its one command buffer, a fence and a recorder; used by one task at a time."""

    def __init__(self, device: Any, queue_family: int, pipelines: Any, push_descriptor_fn: Any) -> None:
        ffi, lib = vk.ffi, vk.lib
        self.device = device
        info = ffi.new("VkCommandPoolCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
            "flags": vk.VK_COMMAND_POOL_CREATE_TRANSIENT_BIT, "queueFamilyIndex": queue_family})
        out = ffi.new("VkCommandPool*")
        check(lib.vkCreateCommandPool(device, info, ffi.NULL, out), "vkCreateCommandPool")
        self.command_pool = out[0]
        ainfo = ffi.new("VkCommandBufferAllocateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, "commandPool": self.command_pool,
            "level": vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, "commandBufferCount": 1})
        self.cmd_ptr = ffi.new("VkCommandBuffer*")
        check(lib.vkAllocateCommandBuffers(device, ainfo, self.cmd_ptr), "vkAllocateCommandBuffers")
        finfo = ffi.new("VkFenceCreateInfo*", {"sType": vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO})
        self.fence_ptr = ffi.new("VkFence*")
        check(lib.vkCreateFence(device, finfo, ffi.NULL, self.fence_ptr), "vkCreateFence")
        self.submit_info = ffi.new("VkSubmitInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, "commandBufferCount": 1,
            "pCommandBuffers": self.cmd_ptr})
        self.recorder = Recorder(self.cmd_ptr[0], pipelines.layout, pipelines.ssbo_layout, push_descriptor_fn)
        self.queue_slot = 0  # which of the pool's queues this context submits to (queues.py)
        self.stamps: Timestamps | None = None  # made at the first timed batch (`Batch.kernels_begin`)

    def reset(self) -> None:
        """Ready for a new recording: reset the command pool and the fence."""
        check(vk.lib.vkResetCommandPool(self.device, self.command_pool, 0), "vkResetCommandPool")
        check(vk.lib.vkResetFences(self.device, 1, self.fence_ptr), "vkResetFences")

    def destroy(self) -> None:
        """Destroy the fence and the command pool (its work must have finished)."""
        lib, ffi = vk.lib, vk.ffi
        if self.stamps is not None:
            self.stamps.destroy()
        lib.vkDestroyFence(self.device, self.fence_ptr[0], ffi.NULL)
        lib.vkDestroyCommandPool(self.device, self.command_pool, ffi.NULL)


class Batch:
    """One command buffer's worth of work for one task; see the module docstring."""

    def __init__(self, pool: DevicePool, context: Context) -> None:
        self.pool, self.context = pool, context
        self.recorder = context.recorder
        self.max_groups = pool.max_groups
        self._owned: list[Allocation] = []
        self._after: list[tuple[Callable[[], None], object]] = []  # `after_close`
        self._downloads: list[tuple[Allocation, np.ndarray]] = []
        self._ran = False
        self._started = 0.0  # perf_counter at the last submit (`start`)
        self._reusable = False
        self.bytes_uploaded = self.bytes_downloaded = 0
        self.device_seconds = 0.0  # submit to fence, once run
        self.kernel_seconds: float | None = None  # GPU time between kernels_begin and kernels_end
        self._timed = False
        context.reset()
        check(self.recorder.begin(), "vkBeginCommandBuffer")

    def reusable(self) -> Batch:
        """Record for several runs: each `run()` submits the same command buffer again (and copies
        the downloads out again). Call before recording anything; returns the batch."""
        if self.recorder.dispatches or self._owned or self._ran:
            raise RuntimeError("reusable() must be called before anything is recorded")
        self.context.reset()
        check(self.recorder.begin(one_time=False), "vkBeginCommandBuffer")
        self._reusable = True
        return self

    # -- memory ---------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> Allocation:
        """Device memory freed when the batch closes."""
        allocation = self.pool.allocator.alloc(nbytes)
        self._owned.append(allocation)
        return allocation

    def own(self, allocation: Allocation) -> Allocation:
        """Free `allocation` (e.g. an imported host array) with the batch's own; returns it."""
        self._owned.append(allocation)
        return allocation

    def after_close(self, release: Callable[[], None], keep: object = None) -> None:
        """Call `release` when the batch closes (after its fence), keeping `keep` alive until then
        (a resident block bound as an input stays pinned on the device while the batch reads it)."""
        self._after.append((release, keep))

    def staging(self, nbytes: int, download: bool = False) -> Allocation:
        """Host-visible staging memory freed when the batch closes: for uploads (the CPU writes it),
        or with `download` host-cached where the device has it (the CPU reads it); device memory
        where that is mapped. Kernels may bind it as they bind device memory."""
        allocation = self.pool.allocator.alloc(nbytes, staging=True, download=download)
        self._owned.append(allocation)
        return allocation

    def stage_in(self, data: np.ndarray) -> Allocation:
        """The bytes of `data` (1-d uint8) copied by the CPU into new upload staging, which the
        kernels then read in place (no device copy, no device memory)."""
        stage = self.staging(max(data.nbytes, 1))
        copy(stage.host[:data.nbytes], data)
        self.bytes_uploaded += data.nbytes
        return stage

    def upload(self, dst: Allocation, data: np.ndarray) -> None:
        """Put the bytes of `data` (1-d uint8) at the start of `dst` before later work reads it."""
        n = data.nbytes
        if n == 0:
            return
        self.bytes_uploaded += n
        if dst.host is not None:
            copy(dst.host[:n], data)
            return
        stage = self.staging(n)
        copy(stage.host[:n], data)
        self.recorder.copy(stage.buffer, stage.offset, dst.buffer, dst.offset, n)
        self.recorder.barrier()

    def fill_u32(self, dst: Allocation, value: int, nbytes: int) -> None:
        """Set the first `nbytes` (a multiple of 4) of `dst` to a repeated 32-bit `value`."""
        if dst.host is not None:
            dst.host[:nbytes].view(np.uint32)[:] = value
            return
        self.recorder.fill(dst.buffer, dst.offset, nbytes, value)
        self.recorder.barrier()

    def download(self, src: Allocation, out: np.ndarray) -> None:
        """After `run`, `out` (contiguous) holds the first `out.nbytes` bytes of `src`.

        Record it after the last write to `src` and a `barrier()`.
        """
        if out.nbytes == 0:
            return
        self.bytes_downloaded += out.nbytes
        flat = out.reshape(-1).view(np.uint8)
        if src.host is not None:
            self._downloads.append((src, flat))
            return
        stage = self.staging(out.nbytes, download=True)  # host-cached: the CPU reads it
        self.recorder.copy(src.buffer, src.offset, stage.buffer, stage.offset, out.nbytes)
        self._downloads.append((stage, flat))

    # -- work -----------------------------------------------------------------------------------
    def dispatch(self, pipeline: Any, fmt: str, values: list, base_slot: int, n_items: int,
                 items_per_group: int, buffers: tuple | None = None) -> None:
        """Dispatch enough groups for `n_items`, tiled by maxComputeWorkGroupCount[0].

        `buffers`, for a storage-buffer (`*_ssbo`) pipeline: four (VkBuffer, offset, range) bound
        as source, output, indices/mask and status (see `kernels.bind`).
        """
        groups = -(-n_items // items_per_group)
        first = 0
        while first < groups:
            count = min(self.max_groups, groups - first)
            values[base_slot] = first * items_per_group
            self.recorder.dispatch(pipeline, fmt, tuple(values), count, buffers)
            first += count

    def copy(self, src: Allocation, src_offset: int, dst: Allocation, dst_offset: int, nbytes: int) -> None:
        """Device-side copy of `nbytes` (vkCmdCopyBuffer)."""
        if nbytes:
            self.recorder.copy(src.buffer, src.offset + src_offset, dst.buffer, dst.offset + dst_offset,
                               nbytes)

    def prepare(self, kernel: Any, step: Any, args: list, out: Allocation, status: Any) -> list[Prepared]:
        """What `kernel.record(self, step, args, out, status)` would record, packed for `replay`
        (nothing is recorded). The items stay valid while the buffers they name live."""
        preparer = _Preparer(self)
        kernel.record(preparer, step, args, out, status)
        return preparer.items

    def replay(self, items: list[Prepared]) -> None:
        """Record prepared items (no barriers between them: add `barrier()` where one reads what
        an earlier one wrote)."""
        self.recorder.replay(items)

    def timestamp(self, query_pool: Any, index: int) -> None:
        """Write GPU timestamp `index` of `query_pool` (a `Timestamps`' handle) after earlier work."""
        self.recorder.timestamp(query_pool, index)

    def reset_queries(self, query_pool: Any, first: int, count: int) -> None:
        """Reset timestamp queries before this batch writes them."""
        self.recorder.reset_queries(query_pool, first, count)

    def kernels_begin(self) -> None:
        """Start the GPU clock of `kernel_seconds` once the work recorded so far (the uploads) has
        finished; `kernels_end()` stops it. Uses two timestamp queries of the batch's context."""
        context = self.context
        if context.stamps is None:
            context.stamps = Timestamps(self.pool, 2)
        context.stamps.reset(self)
        context.stamps.write(self, 0)
        self._timed = True

    def kernels_end(self) -> None:
        """Stop the GPU clock `kernels_begin` started, once the work recorded so far has finished."""
        if not self._timed or self.context.stamps is None:
            raise RuntimeError("kernels_end() without kernels_begin() in this batch")
        self.context.stamps.write(self, 1)

    def barrier(self) -> None:
        """Later dispatches and copies see the writes recorded so far."""
        self.recorder.barrier()

    @property
    def dispatches(self) -> int:
        """Dispatches recorded so far."""
        return self.recorder.dispatches

    def run(self) -> None:
        """End recording, submit once, wait for the fence, then copy every download out."""
        self.start()
        self.finish()

    def start(self) -> None:
        """End recording and submit once, without waiting: the CPU may go on (fill the next
        staging) while the device works; `finish()` waits. `run()` is both."""
        if not self._ran:
            self.recorder.host_barrier()
            check(self.recorder.end(), "vkEndCommandBuffer")
        elif not self._reusable:
            raise RuntimeError("a batch runs once (call reusable() before recording to run it again)")
        else:
            check(vk.lib.vkResetFences(self.context.device, 1, self.context.fence_ptr), "vkResetFences")
        self._ran = True
        self._started = time.perf_counter()
        prep_gate.release()  # handed off (lavapipe runs it in the submit): the next task may prepare
        self.pool.submit(self.context)

    @property
    def submitted(self) -> bool:
        """Whether `start()` (or `run()`) submitted the batch."""
        return self._ran

    def finish(self) -> None:
        """Wait for the fence of the work `start()` submitted, then copy every download out."""
        self.pool.wait(self.context)
        self.device_seconds = time.perf_counter() - self._started
        if self._timed and self.context.stamps is not None:
            begin, end = self.context.stamps.read()
            self.kernel_seconds = max(end - begin, 0.0) * 1e-9
        for src, flat in self._downloads:
            copy(flat, src.host[:flat.nbytes])

    # -- lifetime -------------------------------------------------------------------------------
    def close(self) -> None:
        """Free the batch's allocations and give the context back (waits if submitted work runs)."""
        allocator = self.pool.allocator
        for allocation in self._owned:
            allocator.free(allocation)
        self._owned.clear()
        self._downloads.clear()
        after, self._after = self._after, []
        try:
            self.pool.release(self.context)
        finally:
            for release, _ in after:
                release()

    def __enter__(self) -> Batch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Preparer:
    """Stands in for a Batch while a kernel records: packs dispatches and copies into `Prepared`
    items instead of recording them (tiling grids as `Batch.dispatch` does)."""

    def __init__(self, batch: Batch) -> None:
        self.pool, self.max_groups, self._recorder = batch.pool, batch.max_groups, batch.recorder
        self.items: list[Prepared] = []
        self._writes: dict[tuple, Any] = {}

    def dispatch(self, pipeline: Any, fmt: str, values: list, base_slot: int, n_items: int,
                 items_per_group: int, buffers: tuple | None = None) -> None:
        groups = -(-n_items // items_per_group)
        first = 0
        while first < groups:
            count = min(self.max_groups, groups - first)
            values[base_slot] = first * items_per_group
            item = self._recorder.prepare(pipeline, fmt, tuple(values), count, buffers, self._writes)
            self.items.append(item)
            first += count

    def copy(self, src: Allocation, src_offset: int, dst: Allocation, dst_offset: int, nbytes: int) -> None:
        if nbytes:
            self.items.append(Recorder.prepare_copy(src.buffer, src.offset + src_offset, dst.buffer,
                                                    dst.offset + dst_offset, nbytes))
