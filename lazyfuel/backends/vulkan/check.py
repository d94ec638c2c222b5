"""One place that turns Vulkan result codes and the `vulkan` package's exceptions into errors.

`check(result, call)` raises `VulkanError` naming the failing call and its VkResult;
`VK_ERROR_OUT_OF_*_MEMORY` become `VulkanMemoryError` (a MemoryError) and
`VK_ERROR_DEVICE_LOST` becomes `DeviceLostError`, so callers can split, retry or rebuild.
`checked(call)` is a context manager doing the same for the `vulkan` package's wrappers, which
raise their own exception classes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

import vulkan as vk

VK_SUCCESS = 0
VK_NOT_READY = 1
VK_TIMEOUT = 2
VK_ERROR_OUT_OF_HOST_MEMORY = -1
VK_ERROR_OUT_OF_DEVICE_MEMORY = -2
VK_ERROR_DEVICE_LOST = -4


class VulkanError(RuntimeError):
    """A Vulkan call failed: `.call` is its name, `.result` the VkResult code, `.name` its name."""

    def __init__(self, call: str, result: int, detail: str = "") -> None:
        self.call, self.result, self.name = call, result, result_name(result)
        extra = f": {detail}" if detail else ""
        super().__init__(f"{call} failed with {self.name} ({result}){extra}")


class VulkanMemoryError(VulkanError, MemoryError):
    """The device or host ran out of memory for a Vulkan call."""


class DeviceLostError(VulkanError):
    """VK_ERROR_DEVICE_LOST: the device pool must be rebuilt."""


@cache
def _names() -> dict[int, str]:
    names: dict[int, str] = {}
    for attr in dir(vk):
        if (attr.startswith("VK_ERROR_") or attr in ("VK_SUCCESS", "VK_NOT_READY", "VK_TIMEOUT",
                                                     "VK_INCOMPLETE", "VK_EVENT_SET", "VK_EVENT_RESET")):
            value = getattr(vk, attr)
            if isinstance(value, int) and not attr.endswith(("_KHR", "_EXT")):
                names.setdefault(value, attr)
    return names


def result_name(result: int) -> str:
    """`VK_ERROR_DEVICE_LOST` for -4, and so on; `VkResult(<n>)` for codes it does not know."""
    return _names().get(result, f"VkResult({result})")


def error(call: str, result: int, detail: str = "") -> VulkanError:
    """The exception for `call` failing with `result` (memory and device-lost get their own type)."""
    if result in (VK_ERROR_OUT_OF_DEVICE_MEMORY, VK_ERROR_OUT_OF_HOST_MEMORY):
        return VulkanMemoryError(call, result, detail)
    if result == VK_ERROR_DEVICE_LOST:
        return DeviceLostError(call, result, detail)
    return VulkanError(call, result, detail)


def check(result: int, call: str, detail: str = "") -> None:
    """Raise the error for `call` unless `result` is VK_SUCCESS."""
    if result != VK_SUCCESS:
        raise error(call, result, detail)


@cache
def _codes_by_class() -> dict[type, int]:
    codes: dict[type, int] = {}
    for code, cls in vk._vulkan.exception_codes.items():
        if isinstance(code, int):
            codes.setdefault(cls, code)
    return codes


@contextmanager
def checked(call: str, detail: str = "") -> Iterator[None]:
    """Run a `vulkan` package wrapper; turn its exception into the error naming `call`."""
    try:
        yield
    except (vk.VkError, vk.VkException) as exc:
        code = _codes_by_class().get(type(exc))
        raise error(call, code if code is not None else -1, detail) from exc
