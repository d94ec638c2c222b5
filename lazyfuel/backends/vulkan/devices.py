"""Physical devices: what each one is, the limits lazyfuel honours, and which one to use.

`DeviceInfo` is plain data (no Vulkan handles): name, kind, driver, the limits that matter
(maxStorageBufferRange, maxComputeWorkGroupCount, push-constant size, allocation size), memory
heaps and whether device-local memory is host-visible (then no staging is needed, as on lavapipe).
`choose(infos)` applies `LAZYFUEL_DEVICE` (index or name substring), else prefers discrete >
integrated > virtual > cpu. `spread(infos)` lists the devices a graph's blocks are spread over:
`LAZYFUEL_DEVICES` (comma-separated indices or name substrings; one may repeat, which gives that
device several pools), else the `LAZYFUEL_DEVICE` one alone, else every usable device of the best
kind. `list_devices()` / `describe_devices()` serve `lazyfuel devices`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import vulkan as vk

from lazyfuel.settings import config

_KINDS = {
    vk.VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: "discrete",
    vk.VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: "integrated",
    vk.VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: "virtual",
    vk.VK_PHYSICAL_DEVICE_TYPE_CPU: "cpu",
    vk.VK_PHYSICAL_DEVICE_TYPE_OTHER: "other",
}
PREFERENCE = ("discrete", "integrated", "virtual", "cpu", "other")
PUSH_DESCRIPTOR = "VK_KHR_push_descriptor"


@dataclass(frozen=True)
class DeviceInfo:
    """One physical device as lazyfuel sees it."""

    index: int
    name: str
    kind: str  # discrete | integrated | virtual | cpu | other
    driver: str
    driver_info: str
    api_version: str
    pipeline_cache_uuid: str
    max_storage_buffer_range: int
    max_workgroup_count: tuple[int, int, int]
    max_workgroup_size: int
    max_push_constants_size: int
    max_memory_allocation_size: int
    heaps: tuple[tuple[int, bool], ...]  # (bytes, device_local)
    host_visible_device_memory: bool  # some device-local type is also host-visible + coherent
    buffer_device_address: bool
    storage_8bit: bool
    storage_16bit: bool
    int64: bool
    int16: bool
    int8: bool
    push_descriptor: bool  # VK_KHR_push_descriptor: enables the storage-buffer fast path
    min_storage_buffer_offset_alignment: int

    @property
    def device_local_bytes(self) -> int:
        """Total size of the device-local heaps."""
        return sum(size for size, local in self.heaps if local)

    @property
    def usable(self) -> bool:
        """Has every feature lazyfuel's kernels need."""
        return not self.missing_features()

    def missing_features(self) -> list[str]:
        """Names of the features lazyfuel needs that this device lacks."""
        needed = {"bufferDeviceAddress": self.buffer_device_address,
                  "storageBuffer8BitAccess": self.storage_8bit,
                  "storageBuffer16BitAccess": self.storage_16bit, "shaderInt64": self.int64,
                  "shaderInt16": self.int16, "shaderInt8": self.int8}
        return [name for name, ok in needed.items() if not ok]

    def describe(self) -> str:
        """A few lines for `lazyfuel devices`."""
        gib = 1 << 30
        heaps = ", ".join(f"{size / gib:.1f} GiB{' device-local' if local else ''}"
                          for size, local in self.heaps)
        missing = self.missing_features()
        return "\n".join([
            f"[{self.index}] {self.name} ({self.kind}; driver {self.driver} {self.driver_info}; "
            f"Vulkan {self.api_version})",
            f"    heaps: {heaps}; host-visible device memory: "
            f"{'yes' if self.host_visible_device_memory else 'no'}",
            f"    maxStorageBufferRange {self.max_storage_buffer_range >> 20} MiB, "
            f"maxComputeWorkGroupCount {list(self.max_workgroup_count)}, "
            f"maxMemoryAllocationSize {self.max_memory_allocation_size >> 20} MiB, "
            f"push descriptors {'yes' if self.push_descriptor else 'no'}",
            "    usable by lazyfuel" if not missing else f"    not usable: lacks {' '.join(missing)}",
        ])


def _version(v: int) -> str:
    return f"{v >> 22}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


def _cstr(chars: Any) -> str:
    return vk.ffi.string(chars).decode("utf-8", "replace")


def query(index: int, physical: Any) -> DeviceInfo:
    """Read one physical device's properties, features and memory into a DeviceInfo."""
    ffi, lib = vk.ffi, vk.lib
    driver = ffi.new("VkPhysicalDeviceDriverProperties*",
                     {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES})
    props2 = ffi.new("VkPhysicalDeviceProperties2*",
                     {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, "pNext": driver})
    lib.vkGetPhysicalDeviceProperties2(physical, props2)
    f11 = ffi.new("VkPhysicalDeviceVulkan11Features*",
                  {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES})
    f12 = ffi.new("VkPhysicalDeviceVulkan12Features*",
                  {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, "pNext": f11})
    feats = ffi.new("VkPhysicalDeviceFeatures2*",
                    {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, "pNext": f12})
    lib.vkGetPhysicalDeviceFeatures2(physical, feats)
    mem = ffi.new("VkPhysicalDeviceMemoryProperties*")
    lib.vkGetPhysicalDeviceMemoryProperties(physical, mem)
    maint3 = _max_allocation(physical)
    p = props2.properties
    limits = p.limits
    heaps = tuple((int(mem.memoryHeaps[i].size),
                   bool(mem.memoryHeaps[i].flags & vk.VK_MEMORY_HEAP_DEVICE_LOCAL_BIT))
                  for i in range(mem.memoryHeapCount))
    host_direct = (vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
                   | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT)
    host_visible = any((mem.memoryTypes[i].propertyFlags & host_direct) == host_direct
                       for i in range(mem.memoryTypeCount))
    api_version = p.apiVersion
    return DeviceInfo(
        index=index,
        name=_cstr(p.deviceName),
        kind=_KINDS.get(p.deviceType, "other"),
        driver=_cstr(driver.driverName),
        driver_info=_cstr(driver.driverInfo),
        api_version=_version(api_version),
        pipeline_cache_uuid=bytes(ffi.buffer(p.pipelineCacheUUID, 16)).hex(),
        max_storage_buffer_range=int(limits.maxStorageBufferRange),
        max_workgroup_count=tuple(int(limits.maxComputeWorkGroupCount[i]) for i in range(3)),
        max_workgroup_size=int(limits.maxComputeWorkGroupSize[0]),
        max_push_constants_size=int(limits.maxPushConstantsSize),
        max_memory_allocation_size=maint3,
        heaps=heaps,
        host_visible_device_memory=host_visible,
        buffer_device_address=bool(f12.bufferDeviceAddress),
        storage_8bit=bool(f12.storageBuffer8BitAccess),
        storage_16bit=bool(f11.storageBuffer16BitAccess),
        int64=bool(feats.features.shaderInt64),
        int16=bool(feats.features.shaderInt16),
        int8=bool(f12.shaderInt8),
        push_descriptor=PUSH_DESCRIPTOR in _extensions(physical),
        min_storage_buffer_offset_alignment=int(limits.minStorageBufferOffsetAlignment),
    )


def _extensions(physical: Any) -> set[str]:
    return {e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(physical, None)}


def _max_allocation(physical: Any) -> int:
    ffi = vk.ffi
    m3 = ffi.new("VkPhysicalDeviceMaintenance3Properties*",
                 {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES})
    props2 = ffi.new("VkPhysicalDeviceProperties2*",
                     {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, "pNext": m3})
    vk.lib.vkGetPhysicalDeviceProperties2(physical, props2)
    return int(m3.maxMemoryAllocationSize)


def enumerate_devices(instance: Any) -> list[tuple[Any, DeviceInfo]]:
    """(VkPhysicalDevice, DeviceInfo) for every device the instance sees, in Vulkan's order."""
    physicals = vk.vkEnumeratePhysicalDevices(instance)
    return [(phys, query(i, phys)) for i, phys in enumerate(physicals)]


def choose(infos: list[DeviceInfo], wanted: str | None = None,
           source: str = "LAZYFUEL_DEVICE") -> DeviceInfo:
    """The device to use: `wanted` (default `LAZYFUEL_DEVICE`) as an index or a name substring,
    else the first usable device of the best kind (discrete > integrated > virtual > cpu).

    Raises RuntimeError naming the devices seen when none matches or none is usable; `source`
    names where `wanted` came from in that message.
    """
    if wanted is None:
        wanted = config.device
    seen = "; ".join(f"[{d.index}] {d.name} ({d.kind})" for d in infos) or "none"
    if not infos:
        raise RuntimeError("no Vulkan device found (on Debian: apt-get install mesa-vulkan-drivers "
                           "for lavapipe, a CPU device)")
    if wanted is not None:
        if wanted.isdigit():
            matches = [d for d in infos if d.index == int(wanted)]
        else:
            matches = [d for d in infos if wanted.lower() in d.name.lower()]
        if not matches:
            raise RuntimeError(f"{source}={wanted!r} matches no Vulkan device; devices: {seen}")
        found = matches[0]
        if not found.usable:
            raise RuntimeError(f"{source}={wanted!r} picks {found.name}, which lacks "
                               f"{' '.join(found.missing_features())}")
        return found
    usable = [d for d in infos if d.usable]
    if not usable:
        raise RuntimeError(f"no Vulkan device has the features lazyfuel needs; devices: {seen}")
    return min(usable, key=lambda d: (PREFERENCE.index(d.kind), d.index))


def spread(infos: list[DeviceInfo], devices: str | None = None) -> list[int]:
    """Indices of the devices a graph's blocks are spread over, in order (an index may repeat).

    `devices` (default `LAZYFUEL_DEVICES`): comma-separated indices or name substrings, each
    resolved as `choose` resolves `LAZYFUEL_DEVICE` (so "0,0" lists device 0 twice). Unset: the
    `LAZYFUEL_DEVICE` device alone when that is set, else every usable device of the best kind
    (both GPUs of a two-GPU machine; never a CPU device beside a GPU).
    """
    if devices is None:
        devices = config.devices or ""
    items = [item.strip() for item in devices.split(",") if item.strip()]
    if items:
        return [choose(infos, item, source="LAZYFUEL_DEVICES item").index for item in items]
    best = choose(infos)
    if config.device:
        return [best.index]
    return [d.index for d in infos if d.usable and d.kind == best.kind]


def list_devices() -> list[DeviceInfo]:
    """Every Vulkan device this process sees (opens a short-lived instance; no device is created)."""
    from lazyfuel.backends.vulkan.instance import create_instance

    instance = create_instance(validation=False)
    try:
        return [info for _, info in enumerate_devices(instance.handle)]
    finally:
        instance.destroy()


def describe_devices() -> str:
    """What `lazyfuel devices` prints: each device and which one lazyfuel would choose."""
    infos = list_devices()
    if not infos:
        return "no Vulkan devices found"
    lines = [d.describe() for d in infos]
    try:
        lines.append(f"lazyfuel uses [{choose(infos).index}] (set LAZYFUEL_DEVICE to pick another)")
        lines.append(f"blocks are spread over {spread(infos)} (set LAZYFUEL_DEVICES to change)")
    except RuntimeError as exc:
        lines.append(str(exc))
    return "\n".join(lines)
