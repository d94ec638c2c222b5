"""CUDA external memory: device memory another API exported as an opaque fd, mapped for CUDA.

`ExternalBuffer.import_fd(fd, size, device, dedicated)` imports the memory behind a POSIX fd
(CUDA takes the fd over: cudaImportExternalMemory, handle type OpaqueFd) on CUDA device `device`
and maps its first `size` bytes as a device pointer (`pointer`); `close()` frees the mapping and
destroys the import. Which API exported the memory is not this module's business (the Cuda
executor's `import_fd`, its `backends.base.MemoryImporter` capability, brings one here).
`device_uuid(index)` is the GPU's UUID, which other APIs report for the same GPU. Needs
cuda-python's `cuda.bindings` (RuntimeError naming it when absent). `cuda_device_with_uuid(uuid)` finds
the CUDA device of a GPU another API names by UUID, and `copy_in` copies device memory into such an
imported mapping (`lf.from_array` of a CUDA tensor).
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


_uuid_devices: dict[bytes, int | str] = {}


def cuda_device_with_uuid(uuid: bytes) -> int | str:
    """The CUDA device number of the GPU whose UUID is `uuid` (what Vulkan's deviceUUID says), or
    why there is none here (no cuda-python, no CUDA device, no device of that UUID); asked once
    per UUID in a process."""
    if uuid not in _uuid_devices:
        _uuid_devices[uuid] = _find_device(uuid)
    return _uuid_devices[uuid]


def _find_device(uuid: bytes) -> int | str:
    try:
        runtime = _runtime()
        count = _checked("cudaGetDeviceCount", runtime.cudaGetDeviceCount())
        uuids = [device_uuid(i) for i in range(count)]
    except RuntimeError as err:
        return f"CUDA is not usable here ({err})"
    if uuid in uuids:
        return uuids.index(uuid)
    return f"none of the {count} CUDA device(s) is the GPU {uuid.hex()}"


def copy_in(dst: int, src: int, device: int, runs: list[tuple[int, int, int]], after: int | None) -> None:
    """Copy device memory to device memory on CUDA device `device`: each (source offset,
    destination offset, bytes) of `runs` from `src` to `dst`, as one 2-d copy where the runs are
    evenly spaced; after the work of CUDA stream `after` (a producer's stream handle, as
    `__cuda_array_interface__` gives it; None: nothing to wait for) and finished when this returns."""
    runtime = _runtime()
    _checked("cudaSetDevice", runtime.cudaSetDevice(device))
    if after is not None:
        _checked("cudaStreamSynchronize", runtime.cudaStreamSynchronize(runtime.cudaStream_t(after)))
    kind, stream = runtime.cudaMemcpyKind.cudaMemcpyDeviceToDevice, runtime.cudaStream_t(0)
    if len(runs) > 1 and _evenly_spaced(runs):
        (s0, d0, n), (s1, d1, _) = runs[0], runs[1]
        _checked("cudaMemcpy2DAsync", runtime.cudaMemcpy2DAsync(
            dst + d0, d1 - d0, src + s0, s1 - s0, n, len(runs), kind, stream))
    else:
        for s, d, n in runs:
            _checked("cudaMemcpyAsync", runtime.cudaMemcpyAsync(dst + d, src + s, n, kind, stream))
    _checked("cudaStreamSynchronize", runtime.cudaStreamSynchronize(stream))


def _evenly_spaced(runs: list[tuple[int, int, int]]) -> bool:
    (s0, d0, n), (s1, d1, _) = runs[0], runs[1]
    return (all(r[2] == n for r in runs) and s1 - s0 >= n and d1 - d0 >= n
            and all(r[0] == s0 + k * (s1 - s0) and r[1] == d0 + k * (d1 - d0) for k, r in enumerate(runs)))
