"""Link registries: named maps from fanned entry-point symbols to `KernelRef`s.

A provider's front matter names its link registry (`link_registry: fuel_vulkan_backend::fkc::
ENTRY_POINTS`); a backend registers a factory under that name, and the registry calls it the first
time a document needs it, so that registering reads no files and starts no device.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from lazyfuel.registry.model import KernelRef

LinkFactory = Callable[[], Mapping[str, KernelRef]]

_factories: dict[str, LinkFactory] = {}
_resolved: dict[str, Mapping[str, KernelRef]] = {}
_lock = threading.Lock()


def register_link_registry(name: str, factory: LinkFactory) -> None:
    """Register `factory` as the link registry called `name`; registering it again is a no-op.

    Raises ValueError if another factory already claimed `name`.
    """
    with _lock:
        known = _factories.get(name)
        if known is not None and known is not factory:
            raise ValueError(f"link registry {name!r} is already registered by {known.__module__}")
        _factories[name] = factory


def link_registry(name: str) -> Mapping[str, KernelRef] | None:
    """The symbol map of the link registry `name`, or None if nobody registered it."""
    with _lock:
        found = _resolved.get(name)
        if found is None and name in _factories:
            found = _resolved[name] = dict(_factories[name]())
        return found


def link_registry_names() -> list[str]:
    """Names of every registered link registry, sorted."""
    with _lock:
        return sorted(_factories)
