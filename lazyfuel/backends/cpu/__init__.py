"""The CPU reference provider: numpy kernels, their link registry and the Cpu executor.

The kernels (`kernels.py`) are the audit reference for every backend and the fallback where no
device exists. `register()` makes the provider known: it registers the link registry
`lazyfuel::cpu::ENTRY_POINTS` and `CpuExecutor`. Importing this package registers nothing, so
`lazyfuel.providers` decides when providers plug in; `register()` is idempotent.
"""

from __future__ import annotations


def register() -> None:
    """Register the CPU link registry and executor (idempotent; imports lazily)."""
    from lazyfuel.backends.base import register_executor
    from lazyfuel.backends.cpu.executor import CpuExecutor
    from lazyfuel.backends.cpu.links import LINK_REGISTRY, entry_points
    from lazyfuel.contracts.model import Backend
    from lazyfuel.registry.links import register_link_registry

    register_link_registry(LINK_REGISTRY, entry_points)
    register_executor(Backend.Cpu, CpuExecutor)
