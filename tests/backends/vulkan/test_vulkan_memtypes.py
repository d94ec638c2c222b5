"""Memory types per use and the transfer mode per device: from drivers' type lists (no device
needed) and on the real device (download staging is host-cached where the device offers it)."""

from __future__ import annotations

import numpy as np
import pytest
from vulkan_helpers import ProgramBuilder, random_array, run_one, same_bits

from lazyfuel.backends.vulkan.memory import VulkanAllocator
from lazyfuel.backends.vulkan.memtypes import (
    CACHED,
    COHERENT,
    LOCAL,
    VISIBLE,
    Mode,
    Use,
    choose_mode,
    host_memory_device,
    maps_device_memory,
    memory_type,
)
from lazyfuel.dtypes import DType

ALL = 0xFFFF
# Memory types as the drivers report them (VkPhysicalDeviceMemoryProperties.memoryTypes).
NVIDIA_REBAR = [0, LOCAL, LOCAL, VISIBLE | COHERENT, VISIBLE | COHERENT | CACHED, LOCAL | VISIBLE | COHERENT]
NVIDIA_NO_BAR = NVIDIA_REBAR[:5]
AMD_DISCRETE = [LOCAL, VISIBLE | COHERENT, LOCAL | VISIBLE | COHERENT, VISIBLE | COHERENT | CACHED,
                LOCAL | 0x40 | 0x80, VISIBLE | COHERENT | 0x40 | 0x80]
LAVAPIPE = [LOCAL | VISIBLE | COHERENT | CACHED]
INTEL_INTEGRATED = [LOCAL, LOCAL | VISIBLE | COHERENT | CACHED, LOCAL | VISIBLE | COHERENT]
AMD_APU = [LOCAL, VISIBLE | COHERENT, LOCAL | VISIBLE | COHERENT, VISIBLE | COHERENT | CACHED]


@pytest.mark.parametrize("flags", [NVIDIA_REBAR, NVIDIA_NO_BAR, AMD_DISCRETE, AMD_APU],
                         ids=["nvidia", "nvidia-nobar", "amd", "amd-apu"])
def test_uncached_device_memory_is_staged_with_cached_downloads(flags):
    """Discrete GPUs, and an APU whose host-visible device memory is uncached, stage."""
    device = flags[memory_type(flags, ALL, Use.DEVICE)]
    upload = flags[memory_type(flags, ALL, Use.UPLOAD)]
    download = flags[memory_type(flags, ALL, Use.DOWNLOAD)]
    assert device & LOCAL and not device & VISIBLE, "the BAR is never the kernels' memory"
    assert upload & (VISIBLE | COHERENT) == VISIBLE | COHERENT and not upload & (LOCAL | CACHED)
    assert download & (VISIBLE | COHERENT | CACHED) == VISIBLE | COHERENT | CACHED and not download & LOCAL
    assert not host_memory_device(flags)
    assert choose_mode(flags, can_import=True, wanted="") is Mode.STAGED
    assert not maps_device_memory(Mode.STAGED, flags)


@pytest.mark.parametrize("flags", [LAVAPIPE, INTEL_INTEGRATED], ids=["lavapipe", "intel-integrated"])
def test_host_memory_devices_map_device_memory(flags):
    assert host_memory_device(flags)
    assert flags[memory_type(flags, ALL, Use.DEVICE, mapped=True)] & CACHED
    assert choose_mode(flags, can_import=True, wanted="auto") is Mode.ZERO_COPY
    assert choose_mode(flags, can_import=False, wanted="") is Mode.DIRECT
    assert maps_device_memory(Mode.ZERO_COPY, flags)


def test_memory_type_honours_the_allowed_bits():
    assert memory_type(NVIDIA_REBAR, 1 << 3, Use.DOWNLOAD) == 3  # uncached only if nothing else is allowed
    with pytest.raises(RuntimeError, match=r"no memory type for upload buffers among types \['0x1'\]"):
        memory_type([LOCAL], ALL, Use.UPLOAD)


def test_mode_names_are_checked():
    with pytest.raises(ValueError, match=r"LAZYFUEL_VULKAN_TRANSFER='copy': expected one of auto direct "
                                         r"staged import zero-copy"):
        choose_mode(LAVAPIPE, True, "copy")
    with pytest.raises(ValueError, match=r"=direct: no device-local memory type of this device is "
                                         r"host-visible"):
        choose_mode(NVIDIA_NO_BAR, True, "direct")
    with pytest.raises(ValueError, match=r"=zero-copy: the device cannot import host memory"):
        choose_mode(LAVAPIPE, False, "zero-copy")
    assert choose_mode(NVIDIA_REBAR, True, "Zero_Copy") is Mode.ZERO_COPY
    assert choose_mode(NVIDIA_REBAR, False, "direct") is Mode.DIRECT


def test_staged_downloads_land_in_host_cached_memory(pool, executor):
    """With device memory unmapped (as on a discrete GPU), results come back through DOWNLOAD
    blocks whose memory type is host-cached where the device has such a type, uploads through
    UPLOAD blocks, and the kernels' memory is never mapped."""
    allocator = VulkanAllocator(pool.device, pool.physical, pool.info, mode=Mode.STAGED)
    saved, pool.allocator = pool.allocator, allocator
    try:
        rng = np.random.default_rng(5)
        x = random_array(rng, DType.F32, (64, 33))
        idx = rng.integers(0, 64, 40).astype(np.uint32)
        b = ProgramBuilder(x, idx)
        same_bits(run_one(executor, b, b.index_select(0, x.shape, DType.F32, 0, 1, 40)), x[idx])
        uses = {block.use: block for block in allocator._blocks}
        assert set(uses) == {Use.DEVICE, Use.UPLOAD, Use.DOWNLOAD}
        assert uses[Use.DEVICE].host is None
        offered = any(f & (VISIBLE | CACHED) == VISIBLE | CACHED for f in allocator._type_flags)
        assert bool(allocator.type_flags(uses[Use.DOWNLOAD].memory_type) & CACHED) == offered
        assert allocator.type_flags(uses[Use.UPLOAD].memory_type) & VISIBLE
    finally:
        pool.allocator = saved
        allocator.destroy()


def test_the_pool_mode_follows_the_device(pool):
    allocator = pool.allocator
    expected = choose_mode(allocator._type_flags, allocator.imports is not None)
    assert allocator.mode is expected
    if pool.info.kind == "cpu":  # lavapipe: device memory is host memory, no staging at all
        assert allocator.direct and allocator.mode in (Mode.ZERO_COPY, Mode.DIRECT)
