"""`lazyfuel.backends.vulkan.check`: VkResult codes and the `vulkan` package's exceptions as one
family of errors naming the failing call and the code; out-of-memory codes as MemoryErrors and
device loss as its own type, so callers split, retry or rebuild."""

from __future__ import annotations

import pytest
import vulkan as vk

from lazyfuel.backends.vulkan.check import (
    DeviceLostError,
    VulkanError,
    VulkanMemoryError,
    check,
    checked,
    error,
    result_name,
)


def test_success_passes_and_a_failure_names_the_call_and_the_code():
    check(vk.VK_SUCCESS, "vkQueueSubmit")
    with pytest.raises(VulkanError, match=r"^vkQueueSubmit failed with VK_TIMEOUT \(2\): after 5 s$") as \
            caught:
        check(vk.VK_TIMEOUT, "vkQueueSubmit", "after 5 s")
    assert (caught.value.call, caught.value.result, caught.value.name) == ("vkQueueSubmit", 2, "VK_TIMEOUT")


@pytest.mark.parametrize(("code", "kind"), [
    (vk.VK_ERROR_OUT_OF_DEVICE_MEMORY, VulkanMemoryError),
    (vk.VK_ERROR_OUT_OF_HOST_MEMORY, VulkanMemoryError),
    (vk.VK_ERROR_DEVICE_LOST, DeviceLostError), (vk.VK_ERROR_INITIALIZATION_FAILED, VulkanError),
])
def test_each_failure_gets_the_type_callers_act_on(code: int, kind: type):
    err = error("vkAllocateMemory", code)
    assert type(err) is kind and isinstance(err, RuntimeError)
    assert isinstance(err, MemoryError) == (kind is VulkanMemoryError)
    assert str(err) == f"vkAllocateMemory failed with {result_name(code)} ({code})"


def test_codes_are_named_by_vulkans_own_names():
    assert result_name(-4) == "VK_ERROR_DEVICE_LOST" and result_name(0) == "VK_SUCCESS"
    assert result_name(vk.VK_ERROR_OUT_OF_DEVICE_MEMORY) == "VK_ERROR_OUT_OF_DEVICE_MEMORY"
    assert result_name(-123456) == "VkResult(-123456)"


def test_the_packages_exceptions_become_the_same_errors():
    with pytest.raises(VulkanMemoryError, match=r"^vkCreateBuffer failed with VK_ERROR_OUT_OF_DEVICE_MEMORY "
                                                r"\(-2\): 4 GiB$") as caught:
        with checked("vkCreateBuffer", "4 GiB"):
            raise vk.VkErrorOutOfDeviceMemory()
    assert isinstance(caught.value.__cause__, vk.VkErrorOutOfDeviceMemory)
    with pytest.raises(DeviceLostError):
        with checked("vkQueueWaitIdle"):
            raise vk.VkErrorDeviceLost()
    with checked("vkDeviceWaitIdle"):
        pass  # nothing raised: nothing to turn
