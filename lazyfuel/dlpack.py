"""DLPack capsules made by numpy's own exporter, and read with ctypes (dlpack.h's structs).

`capsule(pointer, shape, dtype, device, keep)` is what a producer's `__dlpack__` returns: a
PyCapsule over `pointer` (C-contiguous `shape` of numpy `dtype` on DLPack device `device`, a
(device type, number) pair), "dltensor_versioned" (DLPack 1.0, flagged writeable, and IS_COPIED
where `copied`) where the consumer's `max_version` allows it, else the legacy "dltensor". No
Python code of ours runs when a capsule or its tensor is freed: the capsule is the one numpy's
`ndarray.__dlpack__` makes (its destructor and the tensor's deleter are numpy's C functions) over
a private array whose base, an `_Export`, holds `keep`; only what differs from numpy's CPU export
is then written in (the device, an empty array's NULL data, a versioned capsule's flags), so a CPU
capsule takes no ctypes work at all. A consumer (torch, CuPy, numpy) that takes the capsule calls
the deleter when it lets go; an unconsumed capsule, also one a consumer refused with an exception
set (numpy's BufferError for a CUDA capsule), frees it as it dies. Either way `keep` is released
by plain reference counting, so the memory behind `pointer` stays valid exactly as long as a
consumer holds it; what `keep` then runs (a `weakref.finalize`) runs as every finalizer does, the
pending exception saved. `live()` counts the exports still held (what leak tests read).

`read(capsule)` is the other direction, for producers that offer DLPack only: the pointer, device,
shape, byte strides and dtype of a capsule's tensor (`flags(capsule)` its flags); the capsule
(kept by the caller) still owns the memory.

Device types (dlpack.h `DLDeviceType`): `CPU`, `CUDA`, `CUDA_HOST`, `VULKAN`.
"""

from __future__ import annotations

import ctypes
import math
import threading
import weakref
from typing import Any

import numpy as np

CPU, CUDA, CUDA_HOST, VULKAN = 1, 2, 3, 7
NAMES = {1: "CPU", 2: "CUDA", 3: "CUDA pinned host memory", 4: "OpenCL", 7: "Vulkan", 8: "Metal",
         10: "ROCm", 13: "CUDA managed memory", 14: "oneAPI"}
_CAPSULE_NAME = b"dltensor"
_VERSIONED_NAME = b"dltensor_versioned"
IS_COPIED = 1 << 1  # DLPACK_FLAG_BITMASK_IS_COPIED (READ_ONLY is 1 << 0)
# dlpack.h DLDataTypeCode by numpy kind
_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}
_KINDS = {code: kind for kind, code in _CODES.items()}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    # the deleter is the producer's C function: read and written here, never called from Python
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


VERSION = (1, 0)  # the versioned struct's layout as dlpack.h 1.0 defines it
_STRUCTS = {_CAPSULE_NAME: DLManagedTensor, _VERSIONED_NAME: DLManagedTensorVersioned}

# private prototypes (setting argtypes on ctypes.pythonapi's shared functions would change them
# for every other user in the process)
_api = ctypes.pythonapi
_pointer_of = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))
_name_of = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", _api))

_exports: list[weakref.ref[Any]] = []  # weak references to every `_Export` made (no callbacks)
_swept_at = [64]  # sweep dead references once the list doubles past its last live size
_lock = threading.Lock()


class _Export:
    """The base of the private array numpy exports: an array interface over the memory (C order,
    writeable; numpy never reads it) and `keep`, the object the memory lives by."""

    __slots__ = ("__array_interface__", "__weakref__", "keep")

    def __init__(self, pointer: int, shape: tuple[int, ...], dtype: np.dtype, keep: object) -> None:
        self.__array_interface__ = {"shape": tuple(shape), "typestr": dtype.str,
                                    "data": (int(pointer), False), "version": 3}
        self.keep = keep


def dtype_of(dtype: np.dtype) -> DLDataType:
    """The DLPack data type of a numpy dtype; BufferError for one DLPack cannot carry."""
    dtype = np.dtype(dtype)
    if dtype.kind not in _CODES or not dtype.isnative:
        raise BufferError(f"DLPack carries integer, float, complex and bool data in native byte "
                          f"order, not {dtype}")
    return DLDataType(_CODES[dtype.kind], dtype.itemsize * 8, 1)


def numpy_dtype(code: int, bits: int, lanes: int) -> np.dtype:
    """The numpy dtype of a DLPack data type; BufferError for one numpy has no dtype for."""
    if lanes != 1 or code not in _KINDS or bits % 8:
        raise BufferError(f"DLPack data type (code {code}, {bits} bits, {lanes} lanes) has no numpy dtype")
    kind = _KINDS[code]
    return np.dtype("?") if kind == "b" else np.dtype(f"{kind}{bits // 8}")


def capsule(pointer: int, shape: tuple[int, ...], dtype: np.dtype, device: tuple[int, int],
            keep: object, max_version: tuple[int, int] | None = None, copied: bool = False) -> Any:
    """A PyCapsule over C-contiguous, writeable `shape` x `dtype` at `pointer` on `device`,
    keeping `keep` alive until the consumer lets go (see the module docstring): "dltensor"
    (legacy), or "dltensor_versioned" (DLPack 1.0, IS_COPIED where `copied`) where the
    consumer's `max_version` allows it.

    numpy's capsule already says what a CPU one must (the data at `pointer`, byte_offset 0, device
    (kDLCPU, 0), flags 0: the view is writeable and not a copy), so only a capsule on another
    device, of an empty array (numpy's data is a byte it allocated) or `copied` is written to; a
    CPU capsule (the host-visible hand-off) costs no ctypes work at all."""
    if not isinstance(dtype, np.dtype) or dtype.kind not in _CODES or not dtype.isnative:
        dtype = np.dtype(dtype)
        dtype_of(dtype)  # our error text for a dtype DLPack cannot carry
    if not pointer and math.prod(shape):
        raise BufferError(f"a DLPack export of {shape} x {dtype} needs the memory's address, got NULL")
    export = _Export(pointer, shape, dtype, keep)
    view = np.asarray(export)  # over `pointer`, never read: numpy's exporter only takes its layout
    name = _CAPSULE_NAME
    if max_version is not None and tuple(max_version) >= VERSION:
        try:
            made, name = view.__dlpack__(max_version=VERSION), _VERSIONED_NAME
        except TypeError:  # numpy < 2.1 exports legacy capsules only, which a DLPack 1 consumer takes too
            made = view.__dlpack__()
    else:
        made = view.__dlpack__()
    if not pointer or copied or device[0] != CPU or device[1] != 0:
        _write(made, name, pointer, device, copied)
    _track(export)
    return made


_TENSOR_AT = {_CAPSULE_NAME: DLManagedTensor.dl_tensor.offset,
              _VERSIONED_NAME: DLManagedTensorVersioned.dl_tensor.offset}
_DATA_AT, _DEVICE_AT = DLTensor.data.offset, DLTensor.device.offset
_FLAGS_AT = DLManagedTensorVersioned.flags.offset


def _write(made: Any, name: bytes, pointer: int, device: tuple[int, int], copied: bool) -> None:
    """Write into numpy's capsule `made` (named `name`) what differs from a CPU export of ours:
    the data pointer where `pointer` is NULL (an empty array), the device, and the flags of a
    versioned one (IS_COPIED where `copied`, else writeable)."""
    managed = _pointer_of(made, name)
    tensor = managed + _TENSOR_AT[name]
    if not pointer:
        ctypes.c_void_p.from_address(tensor + _DATA_AT).value = None
    at = DLDevice.from_address(tensor + _DEVICE_AT)
    at.device_type, at.device_id = device
    if name == _VERSIONED_NAME:
        ctypes.c_uint64.from_address(managed + _FLAGS_AT).value = IS_COPIED if copied else 0


def _track(export: _Export) -> None:
    """Remember `export` weakly for `live()`, sweeping dead references now and then (here, never
    as an export dies: no code of ours runs then)."""
    with _lock:
        _exports.append(weakref.ref(export))
        if len(_exports) >= 2 * _swept_at[0]:
            _exports[:] = [ref for ref in _exports if ref() is not None]
            _swept_at[0] = max(64, len(_exports))


def live() -> int:
    """How many capsules' exports are still held (made, and neither consumed and let go nor
    dead unconsumed): what leak tests read."""
    with _lock:
        _exports[:] = [ref for ref in _exports if ref() is not None]
        return len(_exports)


def flags(capsule: Any) -> int:
    """The flags of an unconsumed versioned capsule's tensor (`IS_COPIED`, READ_ONLY 1); 0 for a
    legacy one, which has none; BufferError for a capsule of another kind."""
    name, managed = _managed(capsule)
    return int(managed.flags) if name == _VERSIONED_NAME else 0


def _managed(capsule: Any) -> tuple[bytes, Any]:
    """The name of an unconsumed capsule and its DLManagedTensor(Versioned); BufferError for a
    capsule of another kind."""
    name = _name_of(capsule)
    if name not in _STRUCTS:
        raise BufferError("expected an unconsumed DLPack capsule ('dltensor' or "
                          f"'dltensor_versioned'), got {name!r}")
    return name, ctypes.cast(_pointer_of(capsule, name), ctypes.POINTER(_STRUCTS[name])).contents


def read(capsule: Any) -> tuple[int, tuple[int, int], tuple[int, ...], tuple[int, ...], np.dtype]:
    """(pointer, device, shape, byte strides, dtype) of an unconsumed capsule's tensor (the
    pointer includes byte_offset); BufferError for a capsule of another kind."""
    t = _managed(capsule)[1].dl_tensor
    dtype = numpy_dtype(t.dtype.code, t.dtype.bits, t.dtype.lanes)
    shape = tuple(int(t.shape[k]) for k in range(t.ndim))
    if t.strides:
        strides = tuple(int(t.strides[k]) * dtype.itemsize for k in range(t.ndim))
    else:
        strides = tuple(math.prod(shape[k + 1:]) * dtype.itemsize for k in range(t.ndim))
    return (int(t.data or 0) + int(t.byte_offset), (int(t.device.device_type), int(t.device.device_id)),
            shape, strides, dtype)
