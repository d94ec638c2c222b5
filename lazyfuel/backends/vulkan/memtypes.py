"""Which memory type each use of memory gets, and how host arrays reach the device, per device.

Decided from the memory types' property flags alone (no measurement), as the driver reports them:

- `Use.DEVICE` (kernels' buffers): where the device's memory is the host's own cached memory
  (lavapipe, Intel integrated GPUs: a DEVICE_LOCAL|HOST_VISIBLE|HOST_COHERENT|HOST_CACHED type) it
  is mapped and the CPU copies straight in and out. Elsewhere it is plain DEVICE_LOCAL, preferably
  not host-visible: host-visible device-local memory that is not cached (a discrete GPU's PCIe BAR,
  resizable on the H200; an APU's carve-out) the CPU writes fast but reads uncached at a few tens
  of MB/s, so mapping it made downloads crawl.
- `Use.UPLOAD` (host writes, the device copies out): HOST_VISIBLE|HOST_COHERENT system memory,
  preferring uncached (write-combined) and not device-local, as for sequential writes.
- `Use.DOWNLOAD` (the device copies in, the host reads): HOST_VISIBLE|HOST_CACHED first, so the
  CPU reads cached memory; uncached coherent memory only where nothing else exists.

How a program's host inputs and outputs reach the device (`Mode`; `LAZYFUEL_VULKAN_TRANSFER`
names one, else `choose_mode` picks per device):

- `direct`: device memory is mapped; uploads and downloads are CPU copies into and out of it.
- `staged`: the CPU copies into UPLOAD staging buffers, the command buffer copies them into
  DEVICE memory (vkCmdCopyBuffer) and results out into DOWNLOAD staging, which the CPU copies out;
  inputs read once in long rows and results no later step reads skip the device copy, the kernels
  reading and writing the staging itself (`transfer.py`).
- `import`: the host arrays' own pages are imported as Vulkan memory (VK_EXT_external_memory_host)
  and the command buffer copies from and into them: no CPU copy on either side. Arrays that
  cannot be imported (alignment, size, a driver refusal) go the `staged` way.
- `zero-copy`: imported host arrays are bound to the kernels themselves: kernels read the inputs
  and write the results where numpy keeps them (on a discrete GPU: across PCIe, so only the bytes
  a kernel touches cross the bus). What cannot be imported goes the `direct` way where device
  memory is mapped, else the `staged` way.

Defaults: `zero-copy` where device memory is host memory and import is available (else `direct`),
`staged` on discrete GPUs (`import` and `zero-copy` are measured against it by
benchmarks/probes/transfer.py before they become a default there).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum, IntEnum

import vulkan as vk

from lazyfuel.settings import config

LOCAL = vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
VISIBLE = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
COHERENT = vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
CACHED = vk.VK_MEMORY_PROPERTY_HOST_CACHED_BIT
MAPPABLE = VISIBLE | COHERENT
# Property bits lazyfuel never wants (lazily allocated, protected, AMD's device-coherent types).
_AVOID = 0x10 | 0x20 | 0x40 | 0x80
ENV = "LAZYFUEL_VULKAN_TRANSFER"


class Use(IntEnum):
    """What a block of memory is for."""

    DEVICE = 0
    UPLOAD = 1
    DOWNLOAD = 2


class Mode(Enum):
    """How host arrays reach the device and come back (see the module docstring)."""

    DIRECT = "direct"
    STAGED = "staged"
    IMPORT = "import"
    ZERO_COPY = "zero-copy"

    @classmethod
    def parse(cls, text: str) -> Mode:
        """A mode from its name (`direct`, `staged`, `import`, `zero-copy`); ValueError listing them."""
        wanted = text.strip().lower().replace("_", "-")
        for mode in cls:
            if mode.value == wanted:
                return mode
        raise ValueError(f"{ENV}={text!r}: expected one of auto {' '.join(m.value for m in cls)}")

    @property
    def imports(self) -> bool:
        """Whether this mode imports host arrays."""
        return self in (Mode.IMPORT, Mode.ZERO_COPY)


# Per use: (required bits, unwanted bits) in order of preference; the first type that has every
# required bit and none of the unwanted ones wins.
_PREFERENCES: dict[tuple[Use, bool], tuple[tuple[int, int], ...]] = {
    (Use.DEVICE, True): ((LOCAL | MAPPABLE | CACHED, 0), (LOCAL | MAPPABLE, 0)),
    (Use.DEVICE, False): ((LOCAL, VISIBLE), (LOCAL, 0)),
    (Use.UPLOAD, False): ((MAPPABLE, LOCAL | CACHED), (MAPPABLE, LOCAL), (MAPPABLE, 0)),
    (Use.DOWNLOAD, False): ((MAPPABLE | CACHED, LOCAL), (MAPPABLE | CACHED, 0), (MAPPABLE, LOCAL),
                            (MAPPABLE, 0)),
}


def memory_type(flags: Sequence[int], allowed: int, use: Use, mapped: bool = False) -> int:
    """Index of the memory type for `use` among the types whose bit is set in `allowed`
    (VkMemoryRequirements.memoryTypeBits). `mapped`, for `Use.DEVICE`: device memory the host maps
    (the `direct` and `zero-copy` modes). RuntimeError naming the types when none fits."""
    prefs = _PREFERENCES[(use, mapped if use is Use.DEVICE else False)]
    for required, unwanted in prefs:
        for pass_ in (True, False):  # types without exotic bits first
            for i, f in enumerate(flags):
                if allowed >> i & 1 and f & required == required and not f & unwanted and (
                        not pass_ or not f & _AVOID):
                    return i
    raise RuntimeError(f"no memory type for {use.name.lower()} buffers{' (mapped)' if mapped else ''} "
                       f"among types {[hex(f) for f in flags]} (allowed {allowed:#x})")


def host_memory_device(flags: Sequence[int]) -> bool:
    """True where device memory is the host's own cached memory (lavapipe, integrated GPUs with a
    DEVICE_LOCAL|HOST_VISIBLE|HOST_COHERENT|HOST_CACHED type): then the host maps it and no staging
    is needed. Uncached host-visible device memory (a discrete GPU's PCIe BAR, an APU's carve-out)
    does not count: the CPU reads it at tens of MB/s."""
    return any(f & (LOCAL | MAPPABLE | CACHED) == LOCAL | MAPPABLE | CACHED for f in flags)


def mappable_device_memory(flags: Sequence[int]) -> bool:
    """Some device-local type is host-visible and coherent (what the `direct` mode needs)."""
    return any(f & (LOCAL | MAPPABLE) == LOCAL | MAPPABLE for f in flags)


def choose_mode(flags: Sequence[int], can_import: bool, wanted: str | None = None) -> Mode:
    """The transfer mode for a device: `wanted` (default `LAZYFUEL_VULKAN_TRANSFER`; `auto` or
    empty: the per-device default of the module docstring).

    Raises ValueError for an unknown name, and for `direct` where no device-local memory is
    host-visible, or `import` / `zero-copy` where the device cannot import host memory.
    """
    if wanted is None:
        wanted = config.vulkan_transfer
    host = host_memory_device(flags)
    if wanted.strip().lower() in ("", "auto"):
        if host:
            return Mode.ZERO_COPY if can_import else Mode.DIRECT
        return Mode.STAGED
    mode = Mode.parse(wanted)
    if mode is Mode.DIRECT and not mappable_device_memory(flags):
        raise ValueError(f"{ENV}=direct: no device-local memory type of this device is host-visible "
                         f"(types {[hex(f) for f in flags]}); use staged")
    if mode.imports and not can_import:
        raise ValueError(f"{ENV}={mode.value}: the device cannot import host memory "
                         "(VK_EXT_external_memory_host); use staged or direct")
    return mode


def maps_device_memory(mode: Mode, flags: Sequence[int]) -> bool:
    """Whether device blocks are mapped in `mode`: always in `direct`; in `zero-copy` where device
    memory is host memory (its fallback is then a CPU copy); never in `staged` and `import`."""
    if mode is Mode.DIRECT:
        return True
    return mode is Mode.ZERO_COPY and host_memory_device(flags)
