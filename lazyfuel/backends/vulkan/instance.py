"""The Vulkan instance, with the Khronos validation layer and a message collector when asked.

`create_instance(validation)` makes a Vulkan 1.2 instance. With validation on it enables
`VK_LAYER_KHRONOS_validation` and a `VK_EXT_debug_utils` messenger whose warnings and errors are
appended to `Instance.messages`, a plain list of strings that tests assert empty.
`validation_requested()` reads `LAZYFUEL_VALIDATION`: 1/true/yes/on turns the layer on; `sync`
turns on its synchronization validation as well (VK_EXT_validation_features), which reports
hazards between commands: a read after a write with no barrier between them, two unordered
writes, inside a command buffer and across submits.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import vulkan as vk

from lazyfuel.backends.vulkan.check import checked
from lazyfuel.settings import config

API_VERSION = vk.VK_MAKE_VERSION(1, 2, 0)
VALIDATION_LAYER = "VK_LAYER_KHRONOS_validation"
_DEBUG_UTILS = "VK_EXT_debug_utils"
_SEVERITIES = (vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT
               | vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)
_TYPES = (vk.VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT
          | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT
          | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT)


SYNC = "sync"  # the validation level that adds synchronization validation


def validation_requested() -> bool | str:
    """What `LAZYFUEL_VALIDATION` asks for: `"sync"` (the layer with synchronization validation),
    True (1/true/yes/on: the layer alone) or False."""
    return config.validation


@dataclass
class Instance:
    """A VkInstance and, with validation on, its messenger and the messages collected so far."""

    handle: Any
    validation: bool | str
    messages: list[str] = field(default_factory=list)
    _messenger: Any = None
    _callback: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def destroy(self) -> None:
        """Destroy the messenger and the instance (devices made from it must be gone)."""
        if self.handle is None:
            return
        if self._messenger is not None:
            destroy = vk.vkGetInstanceProcAddr(self.handle, "vkDestroyDebugUtilsMessengerEXT")
            destroy(self.handle, self._messenger, None)
            self._messenger = None
        vk.vkDestroyInstance(self.handle, None)
        self.handle = None


def _available_layers() -> set[str]:
    return {p.layerName for p in vk.vkEnumerateInstanceLayerProperties()}


def create_instance(validation: bool | str | None = None) -> Instance:
    """A Vulkan 1.2 instance; with `validation` (default: `LAZYFUEL_VALIDATION`) the Khronos layer,
    with `validation="sync"` its synchronization validation too.

    Raises RuntimeError if validation is asked for but the layer is not installed.
    """
    if validation is None:
        validation = validation_requested()
    layers: list[str] = []
    extensions: list[str] = []
    if validation:
        if VALIDATION_LAYER not in _available_layers():
            raise RuntimeError(f"LAZYFUEL_VALIDATION is set but {VALIDATION_LAYER} is not installed "
                               "(Debian: apt-get install vulkan-validationlayers)")
        layers.append(VALIDATION_LAYER)
        extensions.append(_DEBUG_UTILS)
    app = vk.VkApplicationInfo(pApplicationName="lazyfuel", applicationVersion=1, pEngineName="lazyfuel",
                               engineVersion=1, apiVersion=API_VERSION)
    enabled = vk.ffi.new("VkValidationFeatureEnableEXT[1]",
                         [vk.VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT])
    features = vk.ffi.new("VkValidationFeaturesEXT*", {
        "sType": vk.VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
        "enabledValidationFeatureCount": 1, "pEnabledValidationFeatures": enabled})
    info = vk.VkInstanceCreateInfo(pNext=features if validation == SYNC else None,
                                   pApplicationInfo=app, enabledLayerCount=len(layers),
                                   ppEnabledLayerNames=layers or None,
                                   enabledExtensionCount=len(extensions),
                                   ppEnabledExtensionNames=extensions or None)
    with checked("vkCreateInstance"):
        handle = vk.vkCreateInstance(info, None)
    instance = Instance(handle, validation)
    if validation:
        _attach_messenger(instance)
    return instance


def _attach_messenger(instance: Instance) -> None:
    """Collect every warning and error the layer reports into `instance.messages`."""
    ffi = vk.ffi

    def on_message(severity: int, types: int, data: Any, user: Any) -> int:
        text = ffi.string(data.pMessage).decode("utf-8", "replace") if data.pMessage else "?"
        kind = "ERROR" if severity & vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT else "WARNING"
        with instance._lock:
            instance.messages.append(f"{kind}: {text}")
        return 0

    callback = ffi.callback("PFN_vkDebugUtilsMessengerCallbackEXT", on_message)
    # Built with ffi directly: the package's struct helper routes every callback through one global.
    info = ffi.new("VkDebugUtilsMessengerCreateInfoEXT*", {
        "sType": vk.VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        "messageSeverity": _SEVERITIES,
        "messageType": _TYPES,
        "pfnUserCallback": callback,
    })
    create = vk.vkGetInstanceProcAddr(instance.handle, "vkCreateDebugUtilsMessengerEXT")
    with checked("vkCreateDebugUtilsMessengerEXT"):
        instance._messenger = create(instance.handle, info, None)
    instance._callback = callback
