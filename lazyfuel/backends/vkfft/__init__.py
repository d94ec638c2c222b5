"""The vkfft provider: FFTs (fft, ifft, rfft, irfft along one axis) through pyvkfft's VkFFT.

Here it runs on OpenCL (PoCL on the CPU when no GPU exists; `lazyfuel/contracts/vkfft.md`, backend
OpenCL). `register()` registers the link registry `lazyfuel::vkfft::ENTRY_POINTS` and the
`OpenCLExecutor` factory; the executor opens the device when first asked for, so a machine without
pyopencl, pyvkfft or an OpenCL device reports the backend unusable and plans use the CPU provider's
numpy.fft bindings instead. Importing this package registers nothing; `register()` is idempotent.
"""

from __future__ import annotations


def register() -> None:
    """Register the vkfft link registry and the OpenCL executor (idempotent; imports lazily)."""
    from lazyfuel.backends.base import register_executor
    from lazyfuel.backends.vkfft.executor import OpenCLExecutor
    from lazyfuel.backends.vkfft.links import LINK_REGISTRY, entry_points
    from lazyfuel.contracts.model import Backend
    from lazyfuel.registry.links import register_link_registry

    register_link_registry(LINK_REGISTRY, entry_points)
    register_executor(Backend.OpenCL, OpenCLExecutor)
