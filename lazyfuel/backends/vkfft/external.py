"""CUDA external memory: device memory another API exported as an opaque fd, mapped for CUDA.

`ExternalBuffer.import_fd(fd, size, device, dedicated)` imports the memory behind a POSIX fd
(CUDA takes the fd over: cudaImportExternalMemory, handle type OpaqueFd) on CUDA device `device`
and maps its first `size` bytes as a device pointer (`pointer`); `close()` frees the mapping and
destroys the import. Which API exported the memory is not this module's business (the Cuda
executor's `import_fd`, its `backends.base.MemoryImporter` capability, brings one here).
`device_uuid(index)` is the GPU's UUID, which other APIs report for the same GPU. Needs
cuda-python's `cuda.bindings` (RuntimeError naming it when absent).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def _runtime() -> Any:
    try:
        from cuda.bindings import runtime
    except ImportError as err:
        raise RuntimeError(f"importing external memory into CUDA needs cuda-python ({err}); "
                           "pip install cuda-python") from None
    return runtime


def _checked(call: str, result: tuple[Any, ...]) -> Any:
    """The value of a cuda.bindings call returning (error, value...); RuntimeError naming the call."""
    err, *values = result
    if int(err) != 0:
        raise RuntimeError(f"{call} failed: {err!r}")
    return values[0] if len(values) == 1 else tuple(values)


def device_uuid(index: int) -> bytes:
    """The 16-byte UUID of CUDA device `index`."""
    runtime = _runtime()
    props = _checked("cudaGetDeviceProperties", runtime.cudaGetDeviceProperties(index))
    return bytes(props.uuid.bytes)[:16]


@dataclass(eq=False)
class ExternalBuffer:
    """An imported external memory mapped as `size` bytes at CUDA device pointer `pointer`."""

    handle: Any
    pointer: int
    size: int
    device: int
    closed: bool = False

    @classmethod
    def import_fd(cls, fd: int, size: int, device: int, dedicated: bool = True) -> ExternalBuffer:
        """Import `size` bytes (the exporter's allocation size) behind `fd` on CUDA device
        `device`; CUDA owns the fd once this succeeds (the caller closes it otherwise)."""
        runtime = _runtime()
        _checked("cudaSetDevice", runtime.cudaSetDevice(device))
        desc = runtime.cudaExternalMemoryHandleDesc()
        desc.type = runtime.cudaExternalMemoryHandleType.cudaExternalMemoryHandleTypeOpaqueFd
        desc.handle.fd = fd
        desc.size = size
        desc.flags = getattr(runtime, "cudaExternalMemoryDedicated", 1) if dedicated else 0
        handle = _checked("cudaImportExternalMemory", runtime.cudaImportExternalMemory(desc))
        buffer = runtime.cudaExternalMemoryBufferDesc()
        buffer.offset, buffer.size, buffer.flags = 0, size, 0
        try:
            pointer = _checked("cudaExternalMemoryGetMappedBuffer",
                               runtime.cudaExternalMemoryGetMappedBuffer(handle, buffer))
        except RuntimeError:
            runtime.cudaDestroyExternalMemory(handle)
            raise
        return cls(handle, int(pointer), size, device)

    def close(self) -> None:
        """Free the mapping and destroy the import (idempotent; no CUDA work may still use it)."""
        if self.closed:
            return
        self.closed = True
        runtime = _runtime()
        runtime.cudaSetDevice(self.device)
        runtime.cudaFree(self.pointer)
        runtime.cudaDestroyExternalMemory(self.handle)
