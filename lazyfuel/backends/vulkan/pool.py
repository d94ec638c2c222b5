"""The device pools: one per process and physical device (and replica), shared by every thread.

`get_pool()` builds the default device's pool on first use, `get_pool(i)` device i's, and
`get_pool(i, replica=k)` a k-th pool of its own (its own VkDevice) on the same physical device,
which is how `LAZYFUEL_DEVICES=0,0` tests spreading on a machine with one device; each is torn
down at exit. `spread_slots()` lists the (device, replica) pools a graph's blocks are spread over
(`devices.spread`), `spread_labels()` names them without opening any. Each pool owns its instance,
logical device, its compute queues (`queues.py`: several where the device has them, each context
submitting to one, each with the lock that serialises submissions to it: the `vulkan` wrappers
release the GIL and take no locks), its memory allocator (host memory imported where the device
has VK_EXT_external_memory_host: `transfer.py`), its pipelines, and a free list
of recording contexts so that concurrent tasks each record their own command buffer. Pools share
nothing, so work on one never waits for another.
With `LAZYFUEL_VALIDATION=1` (or `sync`: with synchronization validation) the Khronos validation
layer is on and `validation_messages` lists every warning and error it reported.

A pool whose submit or fence wait reports VK_ERROR_DEVICE_LOST is marked `lost`: `get_pool` then
builds a fresh pool in its place (once, however many threads saw the loss) and closes the lost
one. Closing refuses new batches at once but destroys the Vulkan objects only when the last batch
in flight has closed, so other threads' work on it ends (with its own error, or its result where
the device still answers) before anything it uses is destroyed.
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import Any

import vulkan as vk

from lazyfuel import prep_gate
from lazyfuel.backends.vulkan import faults
from lazyfuel.backends.vulkan.batch import Batch, Context
from lazyfuel.backends.vulkan.check import VK_ERROR_DEVICE_LOST, DeviceLostError, check
from lazyfuel.backends.vulkan.compute_pipelines import Pipelines
from lazyfuel.backends.vulkan.devices import (
    PUSH_DESCRIPTOR,
    DeviceInfo,
    choose,
    enumerate_devices,
    list_devices,
    spread,
)
from lazyfuel.backends.vulkan.export import EXTENSION as EXPORT_FD
from lazyfuel.backends.vulkan.fence_wait import FenceWaiter
from lazyfuel.backends.vulkan.hostmem import EXTENSION as HOST_MEMORY
from lazyfuel.backends.vulkan.instance import create_instance
from lazyfuel.backends.vulkan.kept import KeptImports
from lazyfuel.backends.vulkan.launch_shapes import choose_tuning, measured_picks
from lazyfuel.backends.vulkan.link_probe import LinkProbe, probed_link
from lazyfuel.backends.vulkan.memory import VulkanAllocator
from lazyfuel.backends.vulkan.pinned import PinnedHost
from lazyfuel.backends.vulkan.priors import shader_copy_min
from lazyfuel.backends.vulkan.queues import Queues, queue_count
from lazyfuel.settings import config


class DevicePool:
    """Instance, device, queue, memory, pipelines and submission for one physical device."""

    def __init__(self, device: str | None = None, validation: bool | str | None = None,
                 replica: int = 0) -> None:
        self.pid = os.getpid()
        self.replica = replica
        self.instance = create_instance(validation)
        try:
            found = enumerate_devices(self.instance.handle)
            self.info: DeviceInfo = choose([info for _, info in found], device)
            self.physical = physical = found[self.info.index][0]
            self.queue_family = _compute_family(physical)
            n_queues = queue_count(physical, self.queue_family)
            extra = tuple(e for e in (HOST_MEMORY, EXPORT_FD) if e in _device_extensions(physical))
            self.device = _create_device(physical, self.queue_family, self.info.push_descriptor, n_queues,
                                         extra)
        except BaseException:
            self.instance.destroy()
            raise
        self.queues = Queues(self.device, self.queue_family, n_queues)
        self.queue, self.queue_lock = self.queues.handles[0], self.queues.locks[0]
        # fence waits poll first for `fence_spin` seconds where asked (fence_wait.py; default 0)
        self.fences = FenceWaiter(self.device, config.fence_spin)
        self._count_lock = threading.Lock()
        self.allocator = VulkanAllocator(self.device, physical, self.info)
        self.pinned = PinnedHost(self.allocator)  # page-locked host arrays (lf.empty_pinned)
        self.kept = KeptImports()  # pageable arrays used again, their pages kept imported
        self.pipelines = Pipelines(self.device, self.info.pipeline_cache_uuid, self.info.push_descriptor)
        # Storage buffers bound with push descriptors where the device has them (4x faster than
        # device addresses on lavapipe); LAZYFUEL_VULKAN_MEMORY=address forces device addresses.
        self.push_descriptor_fn = _push_descriptor_fn(self.device) if self.info.push_descriptor else None
        self.ssbo = (self.push_descriptor_fn is not None
                     and config.vulkan_memory != "address")
        self._contexts: list[Context] = []
        self._all_contexts: list[Context] = []
        self._context_lock = threading.Lock()
        # Workgroup size and elements per invocation per kernel family, and the mapping of
        # positions to invocations: measured defaults per device kind, the judge's picks for this
        # device, the environment's overrides (launch_shapes.py).
        tuning = choose_tuning(self.info.kind, self.info.max_workgroup_size,
                               picks=measured_picks(self.info, self.info.max_workgroup_size))
        self.groups: dict[str, tuple[int, int]] = dict(tuning.groups)
        self.coalesced = tuning.coalesced
        # Grids past this many workgroups are split into several dispatches (tests lower it).
        self.max_groups = self.info.max_workgroup_count[0]
        # Device copies from this many bytes run the copy shader (`copy_kernels.copy_bytes`; None:
        # never; tests lower it to run the shader on lavapipe).
        self.shader_copy_min: int | None = shader_copy_min(self.info.kind)
        self.submits = 0
        self.dispatches = 0
        self.closed = False
        self.lost = False  # a submit or wait reported VK_ERROR_DEVICE_LOST: get_pool replaces it
        self._active = 0  # batches holding a context; the last to close destroys a closed pool
        self._destroyed = False
        # what moving bytes costs here, probed once per device (cached) for the transfer priors
        self.link_probe: LinkProbe | None = probed_link(self)

    @property
    def label(self) -> str:
        """`[index] name`, plus which pool of that device it is when it is not the first."""
        return _label(self.info, self.replica)

    @property
    def validation_messages(self) -> list[str]:
        """Warnings and errors from the validation layer so far (empty when it is off)."""
        return self.instance.messages

    def resources(self) -> dict[str, int]:
        """What the pool holds now: the allocator's `resources()`, `contexts` (each a command pool,
        its command buffer and a fence), `idle_contexts` of them free, and `pipelines`. Once
        every batch has closed, a long run should leave these where they were after warm-up."""
        with self._context_lock:
            contexts, idle = len(self._all_contexts), len(self._contexts)
        return {**self.allocator.resources(), "contexts": contexts, "idle_contexts": idle,
                "pipelines": len(self.pipelines)}

    def batch(self) -> Batch:
        """A new batch on a free recording context (use it as a context manager)."""
        with self._context_lock:
            if self.lost:  # a task that picked this pool just before the loss: retried, as if lost
                raise DeviceLostError("vkQueueSubmit", VK_ERROR_DEVICE_LOST,
                                      f"pool {self.label}: its device was lost; get_pool() gives a new one")
            if self.closed:
                raise RuntimeError(f"the Vulkan device pool {self.label} is closed")
            context = self._contexts.pop() if self._contexts else None
            self._active += 1
        try:
            if context is None:
                context = Context(self.device, self.queue_family, self.pipelines, self.push_descriptor_fn)
                context.queue_slot = self.queues.next_slot()
                with self._context_lock:
                    self._all_contexts.append(context)
            return Batch(self, context)
        except BaseException:
            if context is None:
                self._leave()
            else:
                self.release(context)
            raise

    def release(self, context: Context) -> None:
        """Give a context back once its work is done."""
        with self._context_lock:
            self._contexts.append(context)
        self._leave()

    def _leave(self) -> None:
        """One batch fewer in flight; the last one out destroys a closed pool."""
        with self._context_lock:
            self._active -= 1
            last = self.closed and self._active == 0
        if last:
            self._destroy()

    def submit(self, context: Context) -> None:
        """Submit the context's command buffer, signalling its fence."""
        try:
            self.queues.submit(context.queue_slot, context.submit_info, context.fence_ptr[0])
        except DeviceLostError:
            self.lost = True
            raise
        with self._count_lock:
            self.submits += 1
            self.dispatches += context.recorder.dispatches

    def wait(self, context: Context) -> None:
        """Block until the context's fence signals (polled a while first, then asleep, the GIL
        released: `fence_wait.FenceWaiter`)."""
        prep_gate.release()  # a thread waiting gives its task's turn up
        result = self.fences.wait(context.fence_ptr)
        if faults.armed:  # a test hook: report a loss after the real wait
            result = faults.due(faults.WAIT) or result
        if result == VK_ERROR_DEVICE_LOST:
            self.lost = True
        check(result, "vkWaitForFences")

    def close(self) -> None:
        """Refuse new batches; once none is in flight, wait for the device, save the pipeline
        cache and destroy everything (idempotent)."""
        if os.getpid() != self.pid:
            return
        with self._context_lock:
            if self.closed:
                return
            self.closed = True
            idle = self._active == 0
        if idle:
            self._destroy()

    def _destroy(self) -> None:
        with self._context_lock:
            if self._destroyed:
                return
            self._destroyed = True
        vk.lib.vkDeviceWaitIdle(self.device)
        for context in self._all_contexts:
            context.destroy()
        self._all_contexts.clear()
        self._contexts.clear()
        self.pipelines.destroy()
        self.kept.close()
        self.allocator.destroy()
        if self.pinned.close(self._destroy_device):  # else once the last pinned array is freed
            self._destroy_device()

    def _destroy_device(self) -> None:
        vk.lib.vkDestroyDevice(self.device, vk.ffi.NULL)
        self.instance.destroy()


def _compute_family(physical: Any) -> int:
    """The queue family the pool uses: a compute family without graphics where the device has one
    with timestamps (NVIDIA's async compute family: on the H200 its copies move 51 GB/s each way
    against 41-45 on the graphics family's queues, benchmarks/probes/link.py), else the first compute
    family."""
    families = vk.vkGetPhysicalDeviceQueueFamilyProperties(physical)
    compute = [i for i, f in enumerate(families) if f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT]
    if not compute:
        raise RuntimeError("the Vulkan device has no compute queue")
    dedicated = [i for i in compute if not families[i].queueFlags & vk.VK_QUEUE_GRAPHICS_BIT
                 and families[i].timestampValidBits > 0]
    return (dedicated or compute)[0]


def _push_descriptor_fn(device: Any) -> Any:
    pointer = vk.lib.vkGetDeviceProcAddr(device, b"vkCmdPushDescriptorSetKHR")
    if pointer == vk.ffi.NULL:
        return None
    return vk.ffi.cast("PFN_vkCmdPushDescriptorSetKHR", pointer)


def _device_extensions(physical: Any) -> set[str]:
    return {e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(physical, None)}


def _create_device(physical: Any, family: int, push_descriptor: bool, n_queues: int = 1,
                   extra: tuple[str, ...] = ()) -> Any:
    ffi, lib = vk.ffi, vk.lib
    f11 = ffi.new("VkPhysicalDeviceVulkan11Features*", {
        "sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, "storageBuffer16BitAccess": 1})
    f12 = ffi.new("VkPhysicalDeviceVulkan12Features*", {
        "sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, "pNext": f11,
        "bufferDeviceAddress": 1, "storageBuffer8BitAccess": 1, "shaderInt8": 1})
    feats = ffi.new("VkPhysicalDeviceFeatures2*", {
        "sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, "pNext": f12,
        "features": {"shaderInt64": 1, "shaderInt16": 1}})
    priority = ffi.new("float[]", [1.0] * n_queues)
    queue_info = ffi.new("VkDeviceQueueCreateInfo*", {
        "sType": vk.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, "queueFamilyIndex": family,
        "queueCount": n_queues, "pQueuePriorities": priority})
    wanted = ((PUSH_DESCRIPTOR,) if push_descriptor else ()) + extra
    names = [ffi.new("char[]", name.encode()) for name in wanted]
    extensions = ffi.new("char*[]", names)
    info = ffi.new("VkDeviceCreateInfo*", {
        "sType": vk.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, "pNext": feats,
        "queueCreateInfoCount": 1, "pQueueCreateInfos": queue_info,
        "enabledExtensionCount": len(names), "ppEnabledExtensionNames": extensions})
    out = ffi.new("VkDevice*")
    check(lib.vkCreateDevice(physical, info, ffi.NULL, out), "vkCreateDevice")
    return out[0]


_pools: dict[tuple[int, int], DevicePool] = {}  # (physical index, replica) -> pool
_pools_lock = threading.Lock()
_infos: dict[int, list[DeviceInfo]] = {}  # pid -> the devices that process sees (they do not change)


def physical_devices() -> list[DeviceInfo]:
    """Every Vulkan device of this process (enumerated once per process; no device is created)."""
    found = _infos.get(os.getpid())
    if found is None:
        with _pools_lock:
            found = _infos.get(os.getpid())
            if found is None:
                found = _infos[os.getpid()] = list_devices()
    return found


def resolve(device: int | str | None = None) -> int:
    """The physical index `device` names: an index, a name substring, or None for the default
    (`LAZYFUEL_DEVICE`, else the best device). RuntimeError naming the devices when none fits."""
    return choose(physical_devices(), None if device is None else str(device)).index


def get_pool(device: int | str | None = None, replica: int = 0) -> DevicePool:
    """The process's pool for `device` (default: `LAZYFUEL_DEVICE`, else the best device).

    `device` is an index or a name substring; `replica` > 0 gives another pool (its own VkDevice,
    queue and memory) on the same physical device. Built on first use, shared by all threads,
    closed at exit; a forked child builds its own.
    """
    key = (resolve(device), replica)
    pool = _pools.get(key)
    if pool is not None and not pool.closed and not pool.lost and pool.pid == os.getpid():
        return pool
    with _pools_lock:
        pool = stale = _pools.get(key)
        if pool is None or pool.closed or pool.lost or pool.pid != os.getpid():
            pool = _pools[key] = DevicePool(str(key[0]), replica=replica)
            atexit.register(pool.close)
        else:
            stale = None
    if stale is not None and stale.lost:
        stale.close()  # destroyed once the batches still in flight on it have closed
    return pool


def open_pools() -> list[DevicePool]:
    """The pools this process has open now (opens none): what a test checks for validation
    messages after it ran."""
    with _pools_lock:
        return [p for p in _pools.values() if not p.closed and p.pid == os.getpid()]


def spread_slots() -> list[tuple[int, int]]:
    """(physical index, replica) of each pool a graph's blocks are spread over, in order: the
    devices of `devices.spread`, a repeated device getting replicas 1, 2, … (opens no pool)."""
    return list(spread_tuple())


def spread_tuple() -> tuple[tuple[int, int], ...]:
    """`spread_slots()` as the one remembered tuple: the SAME object for as long as the device
    list and the `devices` / `device` knobs stay as they are (a caller may memoise on its
    identity: `ResidentBlock.home`). Every resident block's `home` asks, several times per task:
    the last answer is kept with the device list object and knob values it was made for, the
    device list read by value only when that list is another object."""
    global _spread_last
    infos = physical_devices()
    last = _spread_last  # one tuple, replaced whole: a thread never sees half of another's
    if last is not None and last[0] is infos and last[1] == config.devices and last[2] == config.device:
        return last[3]
    key = (tuple((d.index, d.name, d.kind, d.usable) for d in infos), config.devices, config.device)
    found = _spread_memo.get(key)
    if found is None:
        seen: dict[int, int] = {}
        slots = []
        for index in spread(infos):
            slots.append((index, seen.get(index, 0)))
            seen[index] = seen.get(index, 0) + 1
        found = _spread_memo[key] = tuple(slots)
    _spread_last = (infos, key[1], key[2], found)
    return found


_spread_memo: dict[tuple, tuple[tuple[int, int], ...]] = {}
_spread_last: tuple | None = None  # (device list object, devices knob, device knob, slots): the fast path
_labels_memo: dict[int, tuple[tuple[tuple[int, int], ...], list[str]]] = {}  # id(slots) -> (slots, labels)


def spread_slot(number: int) -> tuple[int, int]:
    """Slot `number` of `spread_slots()`; IndexError saying how many there are when out of range."""
    slots = spread_tuple()
    if not 0 <= number < len(slots):
        raise IndexError(f"Vulkan device {number} asked for, but blocks are spread over {len(slots)} "
                         f"device(s) {list(slots)} (LAZYFUEL_DEVICES={config.devices or ''!r})")
    return slots[number]


def spread_labels() -> list[str]:
    """A label for each pool of `spread_slots()`, as `DevicePool.label` gives it (opens no pool)."""
    slots = spread_tuple()
    found = _labels_memo.get(id(slots))
    if found is None or found[0] is not slots:
        infos = physical_devices()
        found = _labels_memo[id(slots)] = (slots, [_label(infos[index], replica) for index, replica in slots])
    return list(found[1])


def _label(info: DeviceInfo, replica: int) -> str:
    return f"[{info.index}] {info.name}" + (f" (pool {replica + 1})" if replica else "")
