"""The runtime pieces on the real device: devices, errors, pipelines, shaders (memory and validation:
test_vulkan_memory, test_vulkan_instance)."""

from __future__ import annotations

import dataclasses
import importlib.util
import shutil

import numpy as np
import pytest
from vulkan_helpers import REPO

from lazyfuel.backends.vulkan import describe_devices, list_devices
from lazyfuel.backends.vulkan.check import DeviceLostError, VulkanError, check, result_name
from lazyfuel.backends.vulkan.compute_pipelines import Pipelines
from lazyfuel.backends.vulkan.devices import choose

# -- devices -------------------------------------------------------------------------------------


def test_devices_are_listed_with_their_limits(pool):
    infos = list_devices()
    assert infos and all(i.max_storage_buffer_range > 0 and i.max_workgroup_count[0] > 0 for i in infos)
    assert pool.info in infos
    text = describe_devices()
    assert pool.info.name in text and "maxStorageBufferRange" in text and "lazyfuel uses [" in text


def test_choice_by_index_name_and_kind():
    infos = list_devices()
    first = infos[0]
    assert choose(infos, "0") == first
    assert choose(infos, first.name[:5].upper()) == first
    kinds = [dataclasses.replace(first, index=i, kind=k)
             for i, k in enumerate(("cpu", "integrated", "discrete", "virtual"))]
    assert choose(kinds).kind == "discrete"
    assert choose(kinds[:1] + kinds[3:]).kind == "virtual"
    with pytest.raises(RuntimeError,
                       match=r"LAZYFUEL_DEVICE='no such gpu' matches no Vulkan device; devices: \[0\]"):
        choose(infos, "no such gpu")
    lacking = dataclasses.replace(first, buffer_device_address=False)
    with pytest.raises(RuntimeError, match="lacks bufferDeviceAddress"):
        choose([lacking], "0")
    with pytest.raises(RuntimeError, match="no Vulkan device has the features"):
        choose([lacking])


# -- errors --------------------------------------------------------------------------------------


def test_check_names_the_call_and_the_result():
    check(0, "vkQueueSubmit")
    with pytest.raises(VulkanError, match=r"vkQueueSubmit failed with VK_ERROR_INITIALIZATION_FAILED \(-3\)"):
        check(-3, "vkQueueSubmit")
    with pytest.raises(MemoryError, match="vkAllocateMemory failed with VK_ERROR_OUT_OF_DEVICE_MEMORY"):
        check(-2, "vkAllocateMemory")
    with pytest.raises(DeviceLostError):
        check(-4, "vkWaitForFences")
    assert result_name(12345) == "VkResult(12345)"


# -- pipelines -----------------------------------------------------------------------------------


def test_pipeline_cache_is_saved_and_reloaded(pool, tmp_path, monkeypatch):
    monkeypatch.setenv("LAZYFUEL_CACHE_DIR", str(tmp_path))
    first = Pipelines(pool.device, pool.info.pipeline_cache_uuid)
    try:
        first.get("gather_w4", (64, 4, 0))
        first.save_cache()
    finally:
        first.destroy()
    files = list(tmp_path.glob("pipelines-*.bin"))
    assert len(files) == 1 and files[0].stat().st_size > 0
    second = Pipelines(pool.device, pool.info.pipeline_cache_uuid)  # loads the file
    try:
        assert second.get("gather_w4", (64, 4, 0)) is not None
    finally:
        second.destroy()
    files[0].write_bytes(b"garbage")  # a corrupt cache file is ignored, not fatal
    third = Pipelines(pool.device, pool.info.pipeline_cache_uuid)
    third.destroy()


def test_same_pipeline_for_same_specialisation(pool):
    a = pool.pipelines.get("masked_fill_w2", (64, 4, 0))
    assert pool.pipelines.get("masked_fill_w2", (64, 4, 0)) is a
    assert pool.pipelines.get("masked_fill_w2", (64, 2, 0)) is not a


# -- shaders -------------------------------------------------------------------------------------


def _build_module():
    spec = importlib.util.spec_from_file_location("lazyfuel_shader_build", REPO / "shaders" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_spirv_is_fresh():
    if shutil.which("glslc") is None or shutil.which("spirv-val") is None:
        pytest.skip("glslc / spirv-val not installed (make test installs them; the GPU image lacks them)")
    build = _build_module()
    stale = build.stale()
    assert not stale, f"stale SPIR-V: {stale}; run python shaders/build.py and commit the result"


def test_every_variant_is_committed():
    build = _build_module()
    names = {name for name, *_ in build.outputs()}
    have = {p.name for p in (REPO / "lazyfuel" / "backends" / "vulkan" / "spirv").glob("*.spv")}
    assert names == have
    assert all((REPO / "lazyfuel" / "backends" / "vulkan" / "spirv" / n).read_bytes()[:4]
               == np.uint32(0x07230203).tobytes() for n in names)
