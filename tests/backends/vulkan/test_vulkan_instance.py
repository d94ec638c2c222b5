"""The Vulkan instance (`backends.vulkan.instance`): the validation layer's messages collected."""

from __future__ import annotations

import subprocess
import sys

import pytest
import vulkan as vk

from lazyfuel.backends.vulkan.instance import VALIDATION_LAYER


def test_validation_messages_are_collected():
    """A pool of its own (so the shared pool's list stays clean) makes an invalid call on purpose."""
    if VALIDATION_LAYER not in {p.layerName for p in vk.vkEnumerateInstanceLayerProperties()}:
        pytest.skip(f"{VALIDATION_LAYER} is not installed")
    script = (
        "import vulkan as vk\n"
        "from lazyfuel.backends.vulkan.pool import DevicePool\n"
        "p = DevicePool(validation=True)\n"
        "info = vk.ffi.new('VkBufferCreateInfo*', {'sType': vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,"
        " 'size': 0, 'usage': vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT})\n"
        "out = vk.ffi.new('VkBuffer*')\n"
        "vk.lib.vkCreateBuffer(p.device, info, vk.ffi.NULL, out)\n"
        "print(len(p.validation_messages), p.validation_messages[:1])\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "XDG_RUNTIME_DIR": "/tmp"})
    assert done.returncode == 0, done.stderr
    count = int(done.stdout.split()[0])
    assert count >= 1 and "VkBufferCreateInfo" in done.stdout
