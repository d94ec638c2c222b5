"""The vkfft provider on CUDA: `CudaDevice` (a CUDA GPU through CuPy) and `CudaExecutor`.

pyvkfft's CUDA back end runs VkFFT on CuPy arrays. It exists only where pyvkfft was built with
`VKFFT_BACKEND=cuda` (nvcc on PATH or under CUDA_HOME) and CuPy is installed; `CudaDevice.open()`
raises RuntimeError naming the fix when either is missing or no CUDA GPU answers, so the Cuda
backend is reported unusable and plans use the other FFT providers, as for any backend that cannot
run here.

`LAZYFUEL_CUDA_DEVICE` (a CUDA device number) picks the GPU, else device 0. Each executor keeps
one non-blocking stream: VkFFT's apps are built on it and every CuPy operation of a program runs on
it (`_context` makes the device and stream current in the thread running the program, as dask's
worker threads each start without them). The step logic is `executor.py`'s: device arrays are CuPy
arrays, copies are CuPy's (pageable host memory), and irfft's Hermitian fix is CuPy indexing. An input
that CUDA can read where it lies (`__cuda_array_interface__`: a CuPy array, or another API's result
on this GPU mapped through `external.py`) is read there, with no upload. `import_gpu` and
`import_fd` (mapping another API's exported memory on this GPU) are the executor's
`backends.base.MemoryImporter` capability.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from typing import Any

import numpy as np

from lazyfuel.backends.vkfft.executor import VkFFTExecutor
from lazyfuel.backends.vkfft.external import ExternalBuffer, device_uuid
from lazyfuel.contracts.model import Backend
from lazyfuel.settings import config

ENV_DEVICE = "LAZYFUEL_CUDA_DEVICE"
INSTALL_HINT = ("install CuPy (e.g. pip install cupy-cuda12x) and pyvkfft built with its CUDA back "
                "end: VKFFT_BACKEND=cuda pip install --no-binary pyvkfft pyvkfft, with nvcc on PATH "
                "or CUDA_HOME set")


def _modules() -> tuple[Any, Any]:
    """(cupy, pyvkfft.cuda); RuntimeError with the install hint if either cannot load."""
    try:
        import cupy
    except ImportError as err:
        raise RuntimeError(f"the Cuda FFT back end needs CuPy ({err}); {INSTALL_HINT}") from None
    try:
        import pyvkfft.cuda
    except (ImportError, OSError) as err:  # OSError: pyvkfft built without its CUDA library
        raise RuntimeError(f"the Cuda FFT back end needs pyvkfft's CUDA back end ({err}); "
                           f"{INSTALL_HINT}") from None
    return cupy, pyvkfft.cuda


def _choose(count: int, choice: str | None) -> int:
    """The CUDA device number to use of `count`, from `choice` (a number) or 0."""
    if count == 0:
        raise RuntimeError("no CUDA device found (CUDA reports 0 devices)")
    if not choice:
        return 0
    if not (choice.isdigit() and int(choice) < count):
        raise RuntimeError(f"{ENV_DEVICE}={choice!r} is not a CUDA device number; expected 0 to {count - 1}")
    return int(choice)


@dataclass(frozen=True)
class CudaDevice:
    """An opened CUDA GPU: its number, its properties (CuPy's dict) and the stream programs run on."""

    index: int
    properties: dict[str, Any]
    stream: Any

    @classmethod
    def open(cls, choice: str | None = None) -> CudaDevice:
        """Open the chosen GPU (`choice`, else `$LAZYFUEL_CUDA_DEVICE`, else device 0).

        Raises RuntimeError naming the fix when it cannot (see the module docstring).
        """
        cupy, _ = _modules()
        runtime = cupy.cuda.runtime
        try:
            count = runtime.getDeviceCount()
        except runtime.CUDARuntimeError as err:  # no driver, or no device
            raise RuntimeError(f"no usable CUDA device ({err})") from None
        index = _choose(count, choice if choice is not None else config.cuda_device)
        with cupy.cuda.Device(index):
            stream = cupy.cuda.Stream(non_blocking=True)
        return cls(index, dict(runtime.getDeviceProperties(index)), stream)

    @property
    def name(self) -> str:
        """`<GPU name> (CUDA device <n>)`."""
        name = self.properties["name"]
        return f"{name.decode() if isinstance(name, bytes) else name} (CUDA device {self.index})"

    @property
    def max_alloc_bytes(self) -> int:
        """The GPU's memory: CUDA has no smaller per-allocation limit."""
        return int(self.properties["totalGlobalMem"])

    @property
    def unified_memory(self) -> bool:
        """False: device arrays live in GPU memory and host arrays are copied (CuPy's copies)."""
        return False

    @property
    def uuid(self) -> bytes:
        """The GPU's 16-byte UUID (what Vulkan's deviceUUID says for the same GPU)."""
        return device_uuid(self.index)

    @property
    def has_double(self) -> bool:
        """True: every CUDA GPU computes in double precision."""
        return True

    @property
    def fingerprint(self) -> str:
        """What the speed of a kernel here depends on: the GPU, its compute capability and SMs,
        the CUDA driver and runtime versions."""
        import cupy

        p, runtime = self.properties, cupy.cuda.runtime
        return (f"{self.name} | compute {p['major']}.{p['minor']} | {p['multiProcessorCount']} SMs | "
                f"driver {runtime.driverGetVersion()} | runtime {runtime.runtimeGetVersion()}")


class CudaExecutor(VkFFTExecutor):
    """The Cuda backend's `Executor` (FFT steps only).

    Building it opens the GPU (RuntimeError naming the fix when there is none), so a machine
    without CuPy, pyvkfft's CUDA back end or a CUDA GPU reports the backend unusable.
    """

    backend = Backend.Cuda

    def __init__(self, device: CudaDevice | None = None) -> None:
        cupy, vkfft = _modules()
        errors = (cupy.cuda.runtime.CUDARuntimeError, cupy.cuda.driver.CUDADriverError)
        super().__init__(device if device is not None else CudaDevice.open(), vkfft, errors)
        self.cupy = cupy

    def import_gpu(self) -> bytes | str:
        """The GPU's 16-byte UUID (RuntimeError naming cuda-python where it is missing)."""
        return self.device.uuid

    def import_fd(self, fd: int, size: int) -> ExternalBuffer:
        """Map `size` bytes of the memory another API exported as `fd` on this executor's GPU
        (`external.ExternalBuffer.import_fd`: CUDA takes the fd over on success)."""
        return ExternalBuffer.import_fd(fd, size, self.device.index)

    def _allocate(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        return self.cupy.empty(shape, dtype)

    def _on_device(self, value: Any) -> bool:
        return isinstance(value, self.cupy.ndarray)

    def _take(self, value: Any) -> Any:
        if not isinstance(value, np.ndarray) and hasattr(value, "__cuda_array_interface__"):
            with self.cupy.cuda.Device(self.device.index):
                return self.cupy.asarray(value)  # wraps the pointer: no copy
        return super()._take(value)

    def _new_app(self, shape: tuple[int, int], dtype: np.dtype, **options: Any) -> Any:
        return self.vkfft.VkFFTApp(shape, dtype, stream=self.device.stream, **options)

    def _context(self) -> AbstractContextManager[Any]:
        stack = ExitStack()
        stack.enter_context(self.cupy.cuda.Device(self.device.index))
        # CUDA >= 12 makes the primary context current here, which VkFFT's driver calls need
        self.cupy.cuda.runtime.setDevice(self.device.index)
        stack.enter_context(self.device.stream)
        return stack

    def _fetch(self, value: Any, dest: np.ndarray | None) -> np.ndarray:
        if dest is None or not self._on_device(value):
            return super()._fetch(value, dest)
        self._moved[1] += value.nbytes
        return value.get(out=dest)  # straight into the caller's array: no second host copy

    def _finish(self) -> None:
        self.device.stream.synchronize()
