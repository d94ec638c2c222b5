"""Compute pipelines: one per (SPIR-V module, specialisation), with a persisted pipeline cache.

lazyfuel's shaders use one of two pipeline layouts, both with one 128-byte push-constant range:
modules named `*_ssbo` get one push-descriptor set of four storage buffers, the others (which
reach buffers by device address) get no descriptor sets. Specialisation constants are given as a
tuple of 32-bit values for constant ids 0, 1, 2 … (0 is the workgroup size). The VkPipelineCache
is loaded from and saved to `lazyfuel.config.cache_dir` (`$LAZYFUEL_CACHE_DIR`, else
`$XDG_CACHE_HOME/lazyfuel`, else `~/.cache/lazyfuel`), one file per driver cache UUID, so later
processes skip shader builds.
"""

from __future__ import annotations

import os
import threading
from functools import cache
from pathlib import Path
from typing import Any

import vulkan as vk

from lazyfuel.backends.vulkan.check import check
from lazyfuel.settings import config

PUSH_CONSTANT_BYTES = 128
STORAGE_BINDINGS = 4  # source, output, indices or mask, status
_PUSH_DESCRIPTOR_SET_LAYOUT = 0x00000001  # VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR
SPIRV_DIR = Path(__file__).resolve().parent / "spirv"


@cache
def spirv(name: str) -> bytes:
    """The bytes of the committed module `spirv/<name>.spv` (FileNotFoundError naming the fix)."""
    path = SPIRV_DIR / f"{name}.spv"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; run python shaders/build.py")
    return path.read_bytes()


class Pipelines:
    """Builds and keeps the compute pipelines of one VkDevice; thread-safe."""

    def __init__(self, device: Any, cache_uuid: str, push_descriptors: bool = False) -> None:
        self.device = device
        self.cache_path = config.cache_dir / f"pipelines-{cache_uuid}.bin"
        self._lock = threading.Lock()
        self._modules: dict[str, Any] = {}
        self._pipelines: dict[tuple[str, tuple[int, ...]], Any] = {}
        self._keep: list[Any] = []
        self.layout = self._create_layout(None)
        self.set_layout = self._create_set_layout() if push_descriptors else None
        self.ssbo_layout = self._create_layout(self.set_layout) if push_descriptors else None
        self.cache = self._create_cache()

    def __len__(self) -> int:
        """How many pipelines have been built."""
        return len(self._pipelines)

    def get(self, name: str, spec: tuple[int, ...]) -> Any:
        """The VkPipeline for module `name` specialised with `spec` (built on first use)."""
        key = (name, spec)
        found = self._pipelines.get(key)
        if found is None:
            with self._lock:
                found = self._pipelines.get(key)
                if found is None:
                    found = self._pipelines[key] = self._create(name, spec)
        return found

    def _module(self, name: str) -> Any:
        module = self._modules.get(name)
        if module is None:
            ffi, lib = vk.ffi, vk.lib
            code = spirv(name)
            words = ffi.new("uint32_t[]", len(code) // 4)
            ffi.memmove(words, code, len(code))
            info = ffi.new("VkShaderModuleCreateInfo*", {
                "sType": vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, "codeSize": len(code),
                "pCode": words})
            out = ffi.new("VkShaderModule*")
            check(lib.vkCreateShaderModule(self.device, info, ffi.NULL, out), "vkCreateShaderModule", name)
            module = self._modules[name] = out[0]
        return module

    def _create(self, name: str, spec: tuple[int, ...]) -> Any:
        ffi, lib = vk.ffi, vk.lib
        entries = ffi.new("VkSpecializationMapEntry[]",
                          [{"constantID": i, "offset": 4 * i, "size": 4} for i in range(len(spec))])
        data = ffi.new("uint32_t[]", list(spec))
        spec_info = ffi.new("VkSpecializationInfo*", {
            "mapEntryCount": len(spec), "pMapEntries": entries, "dataSize": 4 * len(spec), "pData": data})
        info = ffi.new("VkComputePipelineCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
            "stage": {"sType": vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                      "stage": vk.VK_SHADER_STAGE_COMPUTE_BIT, "module": self._module(name),
                      "pName": self._keep_alive(ffi.new("char[]", b"main")),
                      "pSpecializationInfo": spec_info},
            "layout": self.ssbo_layout if name.endswith("_ssbo") else self.layout})
        out = ffi.new("VkPipeline*")
        check(lib.vkCreateComputePipelines(self.device, self.cache, 1, info, ffi.NULL, out),
              "vkCreateComputePipelines", f"{name} {spec}")
        return out[0]

    def _keep_alive(self, obj: Any) -> Any:
        self._keep.append(obj)
        return obj

    def _create_set_layout(self) -> Any:
        ffi, lib = vk.ffi, vk.lib
        bindings = ffi.new("VkDescriptorSetLayoutBinding[]", [
            {"binding": i, "descriptorType": vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, "descriptorCount": 1,
             "stageFlags": vk.VK_SHADER_STAGE_COMPUTE_BIT} for i in range(STORAGE_BINDINGS)])
        info = ffi.new("VkDescriptorSetLayoutCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
            "flags": _PUSH_DESCRIPTOR_SET_LAYOUT, "bindingCount": STORAGE_BINDINGS, "pBindings": bindings})
        out = ffi.new("VkDescriptorSetLayout*")
        check(lib.vkCreateDescriptorSetLayout(self.device, info, ffi.NULL, out),
              "vkCreateDescriptorSetLayout")
        return out[0]

    def _create_layout(self, set_layout: Any) -> Any:
        ffi, lib = vk.ffi, vk.lib
        ranges = ffi.new("VkPushConstantRange*", {
            "stageFlags": vk.VK_SHADER_STAGE_COMPUTE_BIT, "offset": 0, "size": PUSH_CONSTANT_BYTES})
        sets = ffi.new("VkDescriptorSetLayout*", set_layout) if set_layout is not None else ffi.NULL
        info = ffi.new("VkPipelineLayoutCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
            "setLayoutCount": 0 if set_layout is None else 1, "pSetLayouts": sets,
            "pushConstantRangeCount": 1, "pPushConstantRanges": ranges})
        out = ffi.new("VkPipelineLayout*")
        check(lib.vkCreatePipelineLayout(self.device, info, ffi.NULL, out), "vkCreatePipelineLayout")
        return out[0]

    def _create_cache(self) -> Any:
        ffi, lib = vk.ffi, vk.lib
        try:
            initial = self.cache_path.read_bytes()
        except OSError:
            initial = b""
        out = ffi.new("VkPipelineCache*")
        for data in (initial, b"") if initial else (b"",):
            buf = ffi.from_buffer(data) if data else ffi.NULL
            info = ffi.new("VkPipelineCacheCreateInfo*", {
                "sType": vk.VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
                "initialDataSize": len(data), "pInitialData": buf})
            if lib.vkCreatePipelineCache(self.device, info, ffi.NULL, out) == 0:
                return out[0]
        check(-1, "vkCreatePipelineCache")  # both attempts failed; raises
        return None

    def save_cache(self) -> None:
        """Write the pipeline cache to disk (best effort: an unwritable cache dir is ignored)."""
        ffi, lib = vk.ffi, vk.lib
        size = ffi.new("size_t*")
        if lib.vkGetPipelineCacheData(self.device, self.cache, size, ffi.NULL) != 0 or size[0] == 0:
            return
        data = ffi.new("char[]", size[0])
        if lib.vkGetPipelineCacheData(self.device, self.cache, size, data) != 0:
            return
        try:
            self.cache_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.cache_path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(ffi.buffer(data, size[0])[:])
            os.replace(tmp, self.cache_path)
        except OSError:
            pass

    def destroy(self) -> None:
        """Save the cache, then destroy pipelines, modules, the layout and the cache."""
        ffi, lib = vk.ffi, vk.lib
        self.save_cache()
        for pipeline in self._pipelines.values():
            lib.vkDestroyPipeline(self.device, pipeline, ffi.NULL)
        for module in self._modules.values():
            lib.vkDestroyShaderModule(self.device, module, ffi.NULL)
        lib.vkDestroyPipelineCache(self.device, self.cache, ffi.NULL)
        lib.vkDestroyPipelineLayout(self.device, self.layout, ffi.NULL)
        if self.ssbo_layout is not None:
            lib.vkDestroyPipelineLayout(self.device, self.ssbo_layout, ffi.NULL)
            lib.vkDestroyDescriptorSetLayout(self.device, self.set_layout, ffi.NULL)
        self._pipelines.clear()
        self._modules.clear()
