"""`OpenCLExecutor`: the vkfft provider's FFT steps through pyvkfft's OpenCL back end (`executor.py`).

Device arrays are pyopencl arrays from one buffer pool on the device's in-order queue. Where device
memory is host memory (PoCL on the CPU, an integrated GPU) host arrays are wrapped in place
(CL_MEM_USE_HOST_PTR) instead of copied, both the inputs VkFFT reads and the results it writes;
reading a wrapped result back maps it. pyopencl arrays cannot assign to a column, so irfft's
Hermitian fix runs as one elementwise kernel.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lazyfuel.backends.vkfft.device import OpenCLDevice, _modules
from lazyfuel.backends.vkfft.executor import VkFFTExecutor
from lazyfuel.contracts.model import Backend

_HERMITIAN = """
long j = i % m;
dst[i] = src[i];
if (j == 0 || (even && j == m - 1)) dst[i].imag = 0;
"""


class OpenCLExecutor(VkFFTExecutor):
    """The OpenCL backend's `Executor` (FFT steps only).

    Building it opens the device (RuntimeError naming the fix when there is none), so a machine
    without OpenCL reports the backend unusable and plans fall back to the CPU provider.
    """

    backend = Backend.OpenCL

    def __init__(self, device: OpenCLDevice | None = None) -> None:
        cl, vkfft = _modules()
        import pyopencl.array

        super().__init__(device if device is not None else OpenCLDevice.open(), vkfft, (cl.Error,))
        self.cl, self.cla = cl, pyopencl.array
        self._fixers: dict[np.dtype, Any] = {}
        self._backing: dict[int, np.ndarray] = {}  # buffer pointer -> the host array it wraps

    def _allocate(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        return self.cla.empty(self.device.queue, shape, dtype, allocator=self.device.allocator)

    def _on_device(self, value: Any) -> bool:
        return isinstance(value, self.cla.Array)

    def _new_app(self, shape: tuple[int, int], dtype: np.dtype, **options: Any) -> Any:
        return self.vkfft.VkFFTApp(shape, dtype, self.device.queue, **options)

    def _finish(self) -> None:
        self.device.queue.finish()
        self._backing.clear()

    def _upload(self, host: np.ndarray) -> Any:
        if self.device.unified_memory and host.flags.writeable and host.nbytes:
            return self._wrap(host, write=False)  # no copy: the device reads host memory in place
        return super()._upload(host)

    def _result(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        if self.device.unified_memory:  # VkFFT writes straight into the host result
            return self._wrap(np.empty(shape, dtype), write=True)
        return super()._result(shape, dtype)

    def _hermitian(self, src: Any, length: int) -> Any:
        fixer = self._fixers.get(src.dtype)
        if fixer is None:
            from pyopencl.elementwise import ElementwiseKernel

            ctype = "cfloat_t" if src.dtype == np.complex64 else "cdouble_t"
            fixer = self._fixers[src.dtype] = ElementwiseKernel(
                self.device.context, f"{ctype} *dst, const {ctype} *src, long m, int even", _HERMITIAN,
                "lazyfuel_hermitian", preamble="#include <pyopencl-complex.h>")
        dst = self._empty(src.shape, src.dtype)
        even = int(length % 2 == 0 and src.shape[1] == length // 2 + 1)
        fixer(dst, src, np.int64(src.shape[1]), np.int32(even))
        return dst

    def _wrap(self, host: np.ndarray, write: bool) -> Any:
        """A device array over `host`'s own memory (CL_MEM_USE_HOST_PTR), kept until the run ends."""
        flags = self.cl.mem_flags.USE_HOST_PTR | (self.cl.mem_flags.READ_WRITE if write
                                                  else self.cl.mem_flags.READ_ONLY)
        buffer = self.cl.Buffer(self.device.context, flags, hostbuf=host)
        self._backing[buffer.int_ptr] = host
        return self.cla.Array(self.device.queue, host.shape, host.dtype, data=buffer)

    def _host(self, value: Any) -> np.ndarray:
        if isinstance(value, np.ndarray):
            return value
        host = self._backing.get(value.base_data.int_ptr)
        if host is None:
            return super()._host(value)
        mapped, _ = self.cl.enqueue_map_buffer(self.device.queue, value.base_data, self.cl.map_flags.READ,
                                               0, host.shape, host.dtype)
        if mapped.ctypes.data != host.ctypes.data:  # the driver kept its own copy after all
            host[...] = mapped
            self._moved[1] += host.nbytes
        mapped.base.release(self.device.queue)
        return host.reshape(value.shape)
