"""Link registries: named maps from fanned entry-point symbols to `KernelRef`s.

A provider's front matter names its link registry (`link_registry: fuel_vulkan_backend::fkc::
ENTRY_POINTS`); a backend registers a factory under that name, and the registry calls it the first
time a document needs it, so that registering reads no files and starts no device.

The built-in providers register theirs when their backends are imported (`register()`); so that a
fresh process can load a document into any `Registry` before anything else imported them, the
package installs a discovery hook (`set_discovery`), which `link_registry` calls once when asked
for a name nobody registered.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from lazyfuel.registry.model import KernelRef

LinkFactory = Callable[[], Mapping[str, KernelRef]]

_factories: dict[str, LinkFactory] = {}
_resolved: dict[str, Mapping[str, KernelRef]] = {}
_lock = threading.Lock()
_discovery: list[Callable[[], None]] = []  # at most one hook: registers the built-in providers


def register_link_registry(name: str, factory: LinkFactory) -> None:
    """Register `factory` as the link registry called `name`; registering it again is a no-op.

    Raises ValueError if another factory already claimed `name`.
    """
    with _lock:
        known = _factories.get(name)
        if known is not None and known is not factory:
            raise ValueError(f"link registry {name!r} is already registered by {known.__module__}")
        _factories[name] = factory


def set_discovery(hook: Callable[[], None]) -> None:
    """Install `hook`, which registers the built-in providers' link registries (idempotent), to be
    called the first time a name is looked up that nobody has registered yet."""
    with _lock:
        _discovery[:] = [hook]


def link_registry(name: str) -> Mapping[str, KernelRef] | None:
    """The symbol map of the link registry `name`, or None if nobody registered it (after the
    discovery hook, if one is installed, had its chance to register the built-in ones)."""
    with _lock:
        hooks = [] if name in _factories else _discovery[:]
    for hook in hooks:  # outside the lock: the hook registers through `register_link_registry`
        hook()
    with _lock:
        found = _resolved.get(name)
        if found is None and name in _factories:
            found = _resolved[name] = dict(_factories[name]())
        return found


def link_registry_names() -> list[str]:
    """Names of every registered link registry, sorted."""
    with _lock:
        return sorted(_factories)
