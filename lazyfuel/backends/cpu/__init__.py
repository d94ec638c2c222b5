"""The CPU reference provider: numpy kernels, their link registry and the Cpu executor.

The kernels (`kernels.py`) are the audit reference for every backend and the fallback where no
device exists. `register()` makes the provider known: it registers the link registry
`lazyfuel::cpu::ENTRY_POINTS` and `CpuExecutor`. Importing this package registers its
`BackendInfo` only (`backends.catalog`), so `lazyfuel.providers` decides when providers plug in;
`register()` is idempotent.
"""

from __future__ import annotations

from lazyfuel.backends.catalog import BackendInfo
from lazyfuel.backends.catalog import register as register_backend
from lazyfuel.backends.cpu.priors import KERNELS, host_prior
from lazyfuel.contracts.model import Backend


def register() -> None:
    """Register the CPU link registry and executor (idempotent; imports lazily)."""
    from lazyfuel.backends.base import register_executor
    from lazyfuel.backends.cpu.executor import CpuExecutor
    from lazyfuel.backends.cpu.links import LINK_REGISTRY, entry_points
    from lazyfuel.registry.links import register_link_registry

    register_link_registry(LINK_REGISTRY, entry_points)
    register_executor(Backend.Cpu, CpuExecutor)


def fingerprint() -> str:
    """The Cpu backend's device: the host CPU and the numpy build that runs the kernels."""
    import numpy as np

    from lazyfuel.backends.host import host_cpu

    return f"Cpu | {host_cpu()} | numpy {np.__version__}"


# the numpy reference: last where costs tie
register_backend(BackendInfo(Backend.Cpu, rank=90, documents=("cpu.md",), plug_in=register,
                             fingerprint=fingerprint, kernels=KERNELS, prior=host_prior,
                             in_host_memory=True))
