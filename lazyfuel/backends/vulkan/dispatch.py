"""The hot path: recording dispatches, copies and barriers into one command buffer.

Dense on purpose (this is the hot path): every struct is built once per `Recorder`, every
call goes straight to `vulkan.lib`, and nothing is allocated, logged or validated per call.
Push-constant bytes are copied by Vulkan at record time, so one scratch buffer serves all calls.
Work that repeats (the same kernel on the same buffers) can be packed once into `Prepared`
dispatches (`Recorder.prepare`, readable) and recorded again and again with `Recorder.replay`
(the dense loop: bind if changed, push descriptors if changed, push constants, dispatch). No
barrier is recorded between replayed items: callers add one only where a later item reads what
an earlier one wrote.

Callers must have checked, earlier and in readable code:
- the command buffer is in the recording state (`begin` was called) and owned by this thread;
- `pipeline` was built with the shared pipeline layout `layout`;
- `fmt` packs to at most 128 bytes and matches the shader's push-constant block;
- `groups` is in 1 … maxComputeWorkGroupCount[0] (batch.py tiles larger grids);
- every address pushed lies inside a live allocation that stays alive until the fence signals;
- copy ranges lie inside their buffers;
- a `Prepared` item's buffers and pipeline outlive every command buffer it is replayed into;
- timestamp queries lie inside their query pool and were reset (`reset_queries`) before written;
- `buffers` (storage-buffer pipelines only) holds four (VkBuffer, offset, range) with offsets
  aligned to minStorageBufferOffsetAlignment and ranges within maxStorageBufferRange.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import vulkan as vk

_lib, _ffi = vk.lib, vk.ffi
_COMPUTE = vk.VK_SHADER_STAGE_COMPUTE_BIT
_BIND_COMPUTE = vk.VK_PIPELINE_BIND_POINT_COMPUTE
_STAGE_COMPUTE = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
_STAGE_TRANSFER = vk.VK_PIPELINE_STAGE_TRANSFER_BIT
_STAGE_HOST = vk.VK_PIPELINE_STAGE_HOST_BIT
_WRITES = vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT
_READS = vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_TRANSFER_READ_BIT | _WRITES
_STAGE_BOTTOM = vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT
_STRUCTS: dict[str, struct.Struct] = {}  # push-constant formats, compiled once


def _struct(fmt: str) -> struct.Struct:
    found = _STRUCTS.get(fmt)
    if found is None:
        found = _STRUCTS[fmt] = struct.Struct(fmt)
    return found


class Prepared:
    """One dispatch (or, with `copy` set, one vkCmdCopyBuffer) packed for `Recorder.replay`.

    Owns its push-constant bytes and descriptor writes, so replaying it allocates nothing."""

    __slots__ = ("copy", "dst", "groups", "layout", "pipeline", "push", "size", "src", "writes")

    def __init__(self, pipeline: Any = None, layout: Any = None, push: Any = None, size: int = 0,
                 groups: int = 0, writes: Any = None, copy: Any = None, src: Any = None,
                 dst: Any = None) -> None:
        self.pipeline, self.layout, self.push, self.size, self.groups = pipeline, layout, push, size, groups
        self.writes, self.copy, self.src, self.dst = writes, copy, src, dst


class Recorder:
    """Records into one VkCommandBuffer with pre-built structs."""

    __slots__ = ("_begin", "_bound", "_buffers", "_cmd", "_copy", "_device_barrier", "_host_barrier",
                 "_infos", "_layout", "_push", "_push_descriptors", "_push_view", "_ssbo_layout", "_writes",
                 "dispatches")

    def __init__(self, cmd: Any, layout: Any, ssbo_layout: Any = None, push_descriptors: Any = None) -> None:
        self._cmd, self._layout, self._ssbo_layout = cmd, layout, ssbo_layout
        self._push_descriptors = push_descriptors
        self._infos = _ffi.new("VkDescriptorBufferInfo[4]")
        self._writes = _ffi.new("VkWriteDescriptorSet[4]", [
            {"sType": vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, "dstBinding": i, "descriptorCount": 1,
             "descriptorType": vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, "pBufferInfo": self._infos + i}
            for i in range(4)])
        self._buffers = None
        self._push = _ffi.new("uint8_t[128]")
        self._push_view = _ffi.buffer(self._push)
        self._copy = _ffi.new("VkBufferCopy*")
        self._begin = _ffi.new("VkCommandBufferBeginInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
            "flags": vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT})
        self._device_barrier = _ffi.new("VkMemoryBarrier*", {
            "sType": vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER, "srcAccessMask": _WRITES, "dstAccessMask": _READS})
        self._host_barrier = _ffi.new("VkMemoryBarrier*", {
            "sType": vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER, "srcAccessMask": _WRITES,
            "dstAccessMask": vk.VK_ACCESS_HOST_READ_BIT})
        self._bound = None
        self.dispatches = 0

    def begin(self, one_time: bool = True) -> int:
        """Start recording (the command pool was reset); returns the VkResult. `one_time=False`
        records a command buffer that may be submitted again and again."""
        self._bound = None
        self._buffers = None
        self.dispatches = 0
        self._begin.flags = vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT if one_time else 0
        return _lib.vkBeginCommandBuffer(self._cmd, self._begin)

    def end(self) -> int:
        """Finish recording; returns the VkResult."""
        return _lib.vkEndCommandBuffer(self._cmd)

    def dispatch(self, pipeline: Any, fmt: str, values: tuple, groups: int, buffers: tuple | None) -> None:
        """Bind `pipeline` (if not bound) and `buffers` (if given and changed), push `values` packed
        by `fmt`, dispatch `groups` x 1 x 1."""
        cmd = self._cmd
        if pipeline is not self._bound:
            _lib.vkCmdBindPipeline(cmd, _BIND_COMPUTE, pipeline)
            self._bound = pipeline
        layout = self._layout
        if buffers is None:
            self._buffers = None  # a device-address dispatch: re-push descriptors next time
        else:
            layout = self._ssbo_layout
            if buffers != self._buffers:
                infos = self._infos
                for i, (buf, offset, size) in enumerate(buffers):
                    info = infos[i]
                    info.buffer, info.offset, info.range = buf, offset, size
                self._push_descriptors(cmd, _BIND_COMPUTE, layout, 0, 4, self._writes)
                self._buffers = buffers
        packer = _STRUCTS.get(fmt) or _struct(fmt)
        packer.pack_into(self._push_view, 0, *values)
        _lib.vkCmdPushConstants(cmd, layout, _COMPUTE, 0, packer.size, self._push)
        _lib.vkCmdDispatch(cmd, groups, 1, 1)
        self.dispatches += 1

    def prepare(self, pipeline: Any, fmt: str, values: tuple, groups: int, buffers: tuple | None,
                writes: dict[tuple, Any] | None = None) -> Prepared:
        """Pack what `dispatch` would record into a `Prepared` item (not the hot path). `writes`
        maps buffers to descriptor writes already built, so items on the same buffers share them
        and `replay` pushes them once."""
        packer = _struct(fmt)
        push = _ffi.new("uint8_t[]", max(packer.size, 4))
        packer.pack_into(_ffi.buffer(push), 0, *values)
        if buffers is None:
            return Prepared(pipeline, self._layout, push, packer.size, groups)
        found = writes.get(buffers) if writes is not None else None
        if found is None:
            infos = _ffi.new("VkDescriptorBufferInfo[4]",
                             [{"buffer": b, "offset": o, "range": r} for b, o, r in buffers])
            found = _ffi.new("VkWriteDescriptorSet[4]", [
                {"sType": vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, "dstBinding": i, "descriptorCount": 1,
                 "descriptorType": vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, "pBufferInfo": infos + i}
                for i in range(4)])
            found = (found, infos)  # the writes point into infos: keep both
            if writes is not None:
                writes[buffers] = found
        return Prepared(pipeline, self._ssbo_layout, push, packer.size, groups, found)

    @staticmethod
    def prepare_copy(src: Any, src_offset: int, dst: Any, dst_offset: int, size: int) -> Prepared:
        """A `Prepared` vkCmdCopyBuffer of `size` bytes."""
        region = _ffi.new("VkBufferCopy*", {"srcOffset": src_offset, "dstOffset": dst_offset, "size": size})
        return Prepared(copy=region, src=src, dst=dst)

    def replay(self, items: Sequence[Prepared]) -> None:
        """Record every item in order, with no barriers between them."""
        cmd, bound, pushed = self._cmd, self._bound, None
        push_descriptors = self._push_descriptors
        for d in items:
            if d.copy is not None:
                _lib.vkCmdCopyBuffer(cmd, d.src, d.dst, 1, d.copy)
                continue
            if d.pipeline is not bound:
                _lib.vkCmdBindPipeline(cmd, _BIND_COMPUTE, d.pipeline)
                bound = d.pipeline
            writes = d.writes
            if writes is not None and writes is not pushed:
                push_descriptors(cmd, _BIND_COMPUTE, d.layout, 0, 4, writes[0])
                pushed = writes
            _lib.vkCmdPushConstants(cmd, d.layout, _COMPUTE, 0, d.size, d.push)
            _lib.vkCmdDispatch(cmd, d.groups, 1, 1)
        self._bound, self._buffers = bound, None
        self.dispatches += sum(1 for d in items if d.copy is None)

    def timestamp(self, query_pool: Any, index: int) -> None:
        """Write the GPU timestamp `index` of `query_pool` once all earlier work has finished."""
        _lib.vkCmdWriteTimestamp(self._cmd, _STAGE_BOTTOM, query_pool, index)

    def reset_queries(self, query_pool: Any, first: int, count: int) -> None:
        """Reset queries `first` … `first + count - 1` of `query_pool` (before they are written)."""
        _lib.vkCmdResetQueryPool(self._cmd, query_pool, first, count)

    def copy(self, src: Any, src_offset: int, dst: Any, dst_offset: int, size: int) -> None:
        """vkCmdCopyBuffer of `size` bytes."""
        c = self._copy
        c.srcOffset, c.dstOffset, c.size = src_offset, dst_offset, size
        _lib.vkCmdCopyBuffer(self._cmd, src, dst, 1, c)

    def fill(self, dst: Any, offset: int, size: int, value: int) -> None:
        """vkCmdFillBuffer with a 32-bit pattern (`size` a multiple of 4)."""
        _lib.vkCmdFillBuffer(self._cmd, dst, offset, size, value)

    def barrier(self) -> None:
        """Make compute and transfer writes visible to later compute and transfer work."""
        stages = _STAGE_COMPUTE | _STAGE_TRANSFER
        _lib.vkCmdPipelineBarrier(self._cmd, stages, stages, 0, 1, self._device_barrier,
                                  0, _ffi.NULL, 0, _ffi.NULL)

    def host_barrier(self) -> None:
        """Make compute and transfer writes visible to the host once the fence signals."""
        _lib.vkCmdPipelineBarrier(self._cmd, _STAGE_COMPUTE | _STAGE_TRANSFER, _STAGE_HOST, 0, 1,
                                  self._host_barrier, 0, _ffi.NULL, 0, _ffi.NULL)
