"""The vkfft provider: FFTs (fft, ifft, rfft, irfft along one axis) through pyvkfft's VkFFT.

pyvkfft has an OpenCL and a CUDA back end, and the provider has a backend for each: OpenCL
(`lazyfuel/contracts/vkfft.md`; PoCL on the CPU when no GPU exists) and Cuda (`vkfft_cuda.md`;
CuPy arrays on an NVIDIA GPU). `register()` registers both link registries and both executor
factories (`OpenCLExecutor`, `CudaExecutor`); an executor opens its device when first asked for,
so a machine without pyopencl / CuPy, pyvkfft's back end or a device reports that backend unusable
and plans use another provider (the CPU provider's numpy.fft bindings at the end). Importing this
package registers nothing; `register()` is idempotent.
"""

from __future__ import annotations


def register() -> None:
    """Register the vkfft link registries and executors, OpenCL and Cuda (idempotent; imports lazily)."""
    from lazyfuel.backends.base import register_executor
    from lazyfuel.backends.vkfft.cuda import CudaExecutor
    from lazyfuel.backends.vkfft.links import LINK_FACTORIES, LINK_REGISTRIES
    from lazyfuel.backends.vkfft.opencl import OpenCLExecutor
    from lazyfuel.registry.links import register_link_registry

    for backend, name in LINK_REGISTRIES.items():
        register_link_registry(name, LINK_FACTORIES[backend])
    register_executor(OpenCLExecutor.backend, OpenCLExecutor)
    register_executor(CudaExecutor.backend, CudaExecutor)
