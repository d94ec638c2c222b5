"""DLPack capsules built and read with ctypes (dlpack.h's legacy, unversioned `DLManagedTensor`).

`capsule(pointer, shape, dtype, device, keep)` is what a producer's `__dlpack__` returns: a
PyCapsule named "dltensor" over `pointer` (C-contiguous `shape` of numpy `dtype` on DLPack device
`device`, a (device type, number) pair). The DLManagedTensor's `manager_ctx` holds `keep` (and the
shape array) in a module table until the consumer calls its deleter, or, for a capsule nobody
consumed, until the capsule dies: so the memory behind `pointer` stays valid for as long as any
consumer (torch, CuPy, numpy) holds it, and not longer.

`read(capsule)` is the other direction, for producers that offer DLPack only: the pointer, device,
shape, byte strides and dtype of a capsule's tensor; the capsule (kept by the caller) still owns
the memory. A consumer that passes `max_version` >= (1, 0) (numpy 2, recent torch) gets the
versioned capsule, flagged writeable: numpy makes arrays from a legacy capsule read-only.

Device types (dlpack.h `DLDeviceType`): `CPU`, `CUDA`, `CUDA_HOST`, `VULKAN`.
"""

from __future__ import annotations

import ctypes
import itertools
import math
import threading
from typing import Any

import numpy as np

CPU, CUDA, CUDA_HOST, VULKAN = 1, 2, 3, 7
NAMES = {1: "CPU", 2: "CUDA", 3: "CUDA pinned host memory", 4: "OpenCL", 7: "Vulkan", 8: "Metal",
         10: "ROCm", 13: "CUDA managed memory", 14: "oneAPI"}
_CAPSULE_NAME = b"dltensor"
_VERSIONED_NAME = b"dltensor_versioned"
_USED_NAME = b"used_dltensor"
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
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", _DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


_DELETER_VERSIONED = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                                     ("deleter", _DELETER_VERSIONED), ("flags", ctypes.c_uint64),
                                     ("dl_tensor", DLTensor)]
VERSION = (1, 0)  # the versioned struct's layout as dlpack.h 1.0 defines it

# private prototypes (setting argtypes on ctypes.pythonapi's shared functions would change them
# for every other user in the process)
_api = ctypes.pythonapi
_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p,
                                 _CAPSULE_DESTRUCTOR)(("PyCapsule_New", _api))
_RAW = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)  # (dying capsule, name)
_is_valid_raw = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_pointer_raw = _RAW(("PyCapsule_GetPointer", _api))
_pointer_of = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))
_name_of = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", _api))

_live: dict[int, tuple[Any, ...]] = {}  # manager_ctx -> what the tensor keeps alive
_ids = itertools.count(1)
_lock = threading.Lock()


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


@_DELETER
def _delete(managed: Any, live: dict[int, tuple[Any, ...]] = _live) -> None:
    live.pop(int(managed.contents.manager_ctx or 0), None)  # atomic under the GIL


@_DELETER_VERSIONED
def _delete_versioned(managed: Any, live: dict[int, tuple[Any, ...]] = _live) -> None:
    live.pop(int(managed.contents.manager_ctx or 0), None)


@_CAPSULE_DESTRUCTOR
def _capsule_died(handle: int) -> None:
    """An unconsumed capsule frees its tensor (a consumer renames it "used_dltensor" and calls
    the deleter itself)."""
    for name, struct in ((_CAPSULE_NAME, DLManagedTensor), (_VERSIONED_NAME, DLManagedTensorVersioned)):
        if _is_valid_raw(handle, name):
            managed = ctypes.cast(_pointer_raw(handle, name), ctypes.POINTER(struct))
            managed.contents.deleter(managed)


# The two callbacks must outlive every tensor, also those a consumer frees while the interpreter
# shuts down (after this module's globals are gone): one reference each is never given back.
for _callback in (_delete, _delete_versioned, _capsule_died):
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(_callback))


def capsule(pointer: int, shape: tuple[int, ...], dtype: np.dtype, device: tuple[int, int],
            keep: object, max_version: tuple[int, int] | None = None) -> Any:
    """A PyCapsule over C-contiguous, writeable `shape` x `dtype` at `pointer` on `device`,
    keeping `keep` alive until the consumer lets go (see the module docstring): "dltensor"
    (legacy), or "dltensor_versioned" (DLPack 1.0) where the consumer's `max_version` allows it."""
    versioned = max_version is not None and tuple(max_version) >= VERSION
    managed: Any = DLManagedTensorVersioned() if versioned else DLManagedTensor()
    dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    tensor = managed.dl_tensor
    tensor.data = pointer or None
    tensor.device = DLDevice(*device)
    tensor.ndim = len(shape)
    tensor.dtype = dtype_of(dtype)
    tensor.shape = ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64))
    tensor.strides = None  # NULL: C-contiguous
    tensor.byte_offset = 0
    with _lock:
        ctx = next(_ids)
        _live[ctx] = (managed, dims, keep)
    managed.manager_ctx = ctx
    if versioned:
        managed.version = DLPackVersion(*VERSION)
        managed.flags = 0  # writeable, not a copy
        managed.deleter = _delete_versioned
        return _capsule_new(ctypes.addressof(managed), _VERSIONED_NAME, _capsule_died)
    managed.deleter = _delete
    return _capsule_new(ctypes.addressof(managed), _CAPSULE_NAME, _capsule_died)


def live() -> int:
    """How many capsules' tensors are still held (made and not yet deleted): what leak tests read."""
    return len(_live)


def read(capsule: Any) -> tuple[int, tuple[int, int], tuple[int, ...], tuple[int, ...], np.dtype]:
    """(pointer, device, shape, byte strides, dtype) of an unconsumed capsule's tensor (the
    pointer includes byte_offset); BufferError for a capsule of another kind."""
    name = _name_of(capsule)
    structs = {_CAPSULE_NAME: DLManagedTensor, _VERSIONED_NAME: DLManagedTensorVersioned}
    if name not in structs:
        raise BufferError("expected an unconsumed DLPack capsule ('dltensor' or "
                          f"'dltensor_versioned'), got {name!r}")
    t = ctypes.cast(_pointer_of(capsule, name), ctypes.POINTER(structs[name])).contents.dl_tensor
    dtype = numpy_dtype(t.dtype.code, t.dtype.bits, t.dtype.lanes)
    shape = tuple(int(t.shape[k]) for k in range(t.ndim))
    if t.strides:
        strides = tuple(int(t.strides[k]) * dtype.itemsize for k in range(t.ndim))
    else:
        strides = tuple(math.prod(shape[k + 1:]) * dtype.itemsize for k in range(t.ndim))
    return (int(t.data or 0) + int(t.byte_offset), (int(t.device.device_type), int(t.device.device_id)),
            shape, strides, dtype)
