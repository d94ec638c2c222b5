"""The vkfft provider: FFTs (fft, ifft, rfft, irfft along one axis) through pyvkfft's VkFFT.

pyvkfft has an OpenCL and a CUDA back end, and the provider has a backend for each: OpenCL
(`lazyfuel/contracts/vkfft.md`; PoCL on the CPU when no GPU exists) and Cuda (`vkfft_cuda.md`;
CuPy arrays on an NVIDIA GPU). `register()` registers both link registries and both executor
factories (`OpenCLExecutor`, `CudaExecutor`); an executor opens its device when first asked for,
so a machine without pyopencl / CuPy, pyvkfft's back end or a device reports that backend unusable
and plans use another provider (the CPU provider's numpy.fft bindings at the end). Importing this
package registers the two backends' `BackendInfo` only (`backends.catalog`); `register()` is idempotent.
"""

from __future__ import annotations

from functools import partial

from lazyfuel.backends.catalog import BackendInfo
from lazyfuel.backends.catalog import register as register_backend
from lazyfuel.contracts.model import Backend
from lazyfuel.registry.cost import Throughput

# before any measurement: a CUDA launch costs ~20 µs, an OpenCL one ~200 µs (the judge refines both)
CUDA_KERNELS = Throughput(20e-6, 1e12, 1e13)
OPENCL_KERNELS = Throughput(200e-6, 4e9, 10e9)


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


def fingerprint(backend: Backend) -> str:
    """The vkfft provider's device on `backend` (OpenCL or Cuda): its `fingerprint` (name, driver
    and versions, compute units); a CPU device (PoCL) also names the host CPU."""
    from lazyfuel.backends.base import executor
    from lazyfuel.backends.host import host_cpu
    from lazyfuel.backends.vkfft.executor import VkFFTExecutor

    register()
    runner = executor(backend)
    if not isinstance(runner, VkFFTExecutor):
        raise LookupError(f"the {backend} executor is a {type(runner).__name__}, not the vkfft provider's")
    device = runner.device
    host = f" | host {host_cpu()}" if getattr(device, "kind", None) == "CPU" else ""
    return f"{backend.name} | {device.fingerprint}{host}"


# of the two FFT backends, Cuda before OpenCL where costs tie (docs/decisions.md)
register_backend(BackendInfo(Backend.Cuda, rank=20, documents=("vkfft_cuda.md",), plug_in=register,
                             fingerprint=partial(fingerprint, Backend.Cuda), kernels=CUDA_KERNELS))
register_backend(BackendInfo(Backend.OpenCL, rank=30, documents=("vkfft.md",), plug_in=register,
                             fingerprint=partial(fingerprint, Backend.OpenCL), kernels=OPENCL_KERNELS))
