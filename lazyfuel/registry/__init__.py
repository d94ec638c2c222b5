"""Bindings: contracts fanned per dtype, linked to kernels through named link registries."""

from lazyfuel.registry.cost import fill_unset_cost_for_backend, unknown_cost
from lazyfuel.registry.links import link_registry, register_link_registry
from lazyfuel.registry.model import Binding, BindingKey, KernelRef
from lazyfuel.registry.registry import NoBindingError, Registry, fan_out, revision_hash

__all__ = [
    "Binding",
    "BindingKey",
    "KernelRef",
    "NoBindingError",
    "Registry",
    "fan_out",
    "fill_unset_cost_for_backend",
    "link_registry",
    "register_link_registry",
    "revision_hash",
    "unknown_cost",
]
