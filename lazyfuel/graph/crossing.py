"""How a result crosses from the Vulkan pool to the FFT provider: device to device, or through host.

A chain `gather -> masked_fill -> rfft` is two tasks (`graph.family`): the Vulkan task's result is
the FFT task's input. By default it comes back as a numpy chunk and the FFT provider uploads it
again (device -> host -> device on a GPU). Where the FFT runs on CUDA on the *same GPU* as the
Vulkan pool (deviceUUIDs equal), the Vulkan task instead leaves its result in exported device memory
and hands over a `DeviceChunk`; the Cuda executor maps that memory through CUDA (lazily, via
`__cuda_array_interface__`) and reads it where it lies. This module decides and carries the
crossing but knows neither API: it asks `backends.base` for the source backend's `MemoryExporter`
(Vulkan: `backends/vulkan/export.py`) and the target's `MemoryImporter` (Cuda:
`backends/vkfft/external.py`), each naming its GPU by UUID or saying why it cannot (decision 42);
`device_pairs()` says which pairs may share memory at all (each backend's package registers the
backends that may read its results in device memory: `BackendInfo.shares_memory_with`).

A `DeviceChunk` is safe anywhere a numpy chunk is: `np.asarray` downloads it (`__array__`), and
pickling it (dask.distributed moving it to another worker, spilling) sends numpy, since an fd does
not travel. The Vulkan task hands one over only where lowering marked it (`BlockRecipe.export`:
its consumer group prefers Cuda, it reads the result without a rechunk or views) and, at run time,
its program planned on Vulkan and the device check passes; else the numpy chunk as before.

`LAZYFUEL_CROSSING`: `auto` (default: device to device where the check passes), `host` (never),
`exported` (hand over exported memory whatever the consumer: a test hook for the export path on a
machine without CUDA; the consumer then reads it through host memory). `lf.explain` prints
`describe(...)`: "device to device (exported memory)" or "through host memory" and why.
"""

from __future__ import annotations

import os
import threading
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from lazyfuel.backends import base, catalog
from lazyfuel.backends.base import ExportedResult, ImportedMemory, MemoryImporter
from lazyfuel.contracts.model import Backend
from lazyfuel.planner.program import Program
from lazyfuel.settings import CROSSING_MODES, config

ENV = "LAZYFUEL_CROSSING"
MODES = CROSSING_MODES


def device_pairs() -> set[tuple[Backend, Backend]]:
    """The source -> target pairs that can share memory, as the backends registered them."""
    return catalog.device_pairs()


def mode() -> str:
    """`lazyfuel.config.crossing` (`LAZYFUEL_CROSSING`, default auto; checked there)."""
    return config.crossing


@dataclass(frozen=True)
class Crossing:
    """How a result moves from `source` to `target`: `device` (exported memory) or not, and why."""

    source: Backend
    target: Backend
    device: bool
    why: str

    def describe(self) -> str:
        """The words `explain` prints."""
        if self.device:
            return (f"device to device (exported memory): {self.source.name} leaves the result in "
                    f"exported device memory and {self.target.name} reads it where it lies ({self.why})")
        return (f"through host memory ({self.why}): {self.source.name} hands it back as a numpy chunk "
                f"and {self.target.name} takes it in")


def decide(source: Backend, target: Backend, exporter: bytes | str, importer: bytes | str,
           how: str = "auto") -> Crossing:
    """The crossing from `source` to `target`, given the exporting device's UUID (or why it cannot
    export), the importing device's UUID (or why it cannot import) and the mode `how`."""
    def host(why: str) -> Crossing:
        return Crossing(source, target, False, why)
    if how == "host":
        return host(f"{ENV}=host")
    pairs = device_pairs()
    if (source, target) not in pairs:
        named = sorted(f"{s.name} -> {t.name}" for s, t in pairs)
        return host(f"only {' and '.join(named)} results can stay on the device")
    if isinstance(exporter, str):
        return host(exporter)
    if isinstance(importer, str):
        return host(importer)
    if exporter != importer:
        return host(f"different GPUs: {source.name} device {exporter.hex()}, {target.name} device "
                    f"{importer.hex()}")
    return Crossing(source, target, True, f"one GPU, {exporter.hex()}")


_importers: dict[tuple[int, Backend], tuple[bytes | str, MemoryImporter | None]] = {}
_lock = threading.Lock()


def _importing(target: Backend) -> tuple[bytes | str, MemoryImporter | None]:
    """The GPU `target`'s executor maps memory on and that executor, or why there is none (asked
    once per process: an executor that cannot be built is not tried again for every task)."""
    key = (os.getpid(), target)
    with _lock:
        if key not in _importers:
            _importers[key] = _ask_importer(target)
    return _importers[key]


def _ask_importer(target: Backend) -> tuple[bytes | str, MemoryImporter | None]:
    found = base.importer(target)
    if isinstance(found, str):
        return found, None
    try:
        gpu = found.import_gpu()
    except Exception as err:  # any reason the target cannot say is a reason for host
        return f"{target.name} is not usable here: {err}", None
    return gpu, None if isinstance(gpu, str) else found


def between(source: Backend, target: Backend,
            device: int | None = None) -> tuple[Crossing, MemoryImporter | None]:
    """The crossing from `source`'s executor for `device` (as `backends.base.executor`) to
    `target`'s here, and `target`'s importer when it is device to device (else None). Builds the
    two executors only for a pair in `device_pairs()` when the mode is not `host`."""
    how = mode()
    if how == "host" or (source, target) not in device_pairs():
        return decide(source, target, "", "", how), None
    exporter = base.exporter(source, device)
    exported_on = exporter if isinstance(exporter, str) else exporter.export_gpu()
    imported_on, importer = _importing(target)
    found = decide(source, target, exported_on, imported_on, how)
    return found, importer if found.device else None


def describe(source: Backend, target: Backend, rechunked: bool = False) -> str:
    """`explain`'s words for a result crossing from `source` to `target` here, `rechunked` on the
    way (asks the two backends' default executors where the pair can share memory)."""
    if rechunked:
        return Crossing(source, target, False, "it is rechunked on the host first").describe()
    return between(source, target)[0].describe()


def may_hand_over(source: Backend | None, target: Backend | None) -> bool:
    """Whether lowering marks a `source` group read by a `target` group to hand over device memory
    (the task checks the devices when it runs)."""
    how = mode()
    if how == "host" or not exports(source):
        return False
    return how == "exported" or (source, target) in device_pairs()


def exports(source: Backend | None) -> bool:
    """Whether results of `source` may stay in device memory for some other backend."""
    return any(s is source for s, _ in device_pairs())


def hand_over(program: Program, inputs: list[Any], device: int | None = None,
              target: Backend | None = None) -> Any:
    """Run `program` on its backend's executor for `device`: a `DeviceChunk` where the crossing to
    `target` (default: the first backend the program's backend shares memory with) is device to
    device (or `LAZYFUEL_CROSSING=exported` and the executor can export), else its numpy result as
    `run` gives it."""
    if target is None:
        target = catalog.info(program.backend).shares_memory_with[0]
    crossing, importer = between(program.backend, target, device)
    exporter = base.exporter(program.backend, device)
    if isinstance(exporter, str) or not (crossing.device or mode() == "exported"):
        return base.executor(program.backend, device).run(program, inputs)[0]
    got = exporter.export(program, inputs)
    if isinstance(got, np.ndarray):
        return got
    shape, dtype = program.value_meta(program.outputs[0])
    return DeviceChunk(got, tuple(shape), dtype.numpy, importer)


def is_device_chunk(value: Any) -> bool:
    """Whether `value` is a chunk left on the device (a task passes it on as it is): a
    `DeviceChunk`, or a resident block (`base.is_device_block`)."""
    return base.is_device_block(value)


class DeviceChunk:
    """A C-contiguous block result left in exported device memory (see the module docstring).

    `np.asarray(chunk)` downloads it; `__cuda_array_interface__` (only where `importer`, the
    target's `MemoryImporter`, is set) has the importer map it on first use, with no copy. The
    memory (and its mapping) is released when the chunk and every array made from it are gone.
    """

    __lazyfuel_device_block__ = True  # `backends.base.is_device_block`

    def __init__(self, memory: ExportedResult, shape: tuple[int, ...], dtype: np.dtype,
                 importer: MemoryImporter | None) -> None:
        self.shape, self.dtype, self.importer = shape, np.dtype(dtype), importer
        self.memory = memory
        self._mapped: list[ImportedMemory] = []  # the importer's mapping, once made
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _release, memory, self._mapped)

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))
    nbytes = property(lambda self: self.size * self.dtype.itemsize)

    @property
    def strides(self) -> tuple[int, ...]:
        """C-contiguous strides in bytes, as numpy gives them."""
        return np.empty((0,), self.dtype).reshape(0, *self.shape[1:]).strides if self.shape else ()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        out = np.empty(self.shape, self.dtype)
        if self.nbytes:
            self.memory.download(out)
        return out if dtype is None else out.astype(dtype, copy=False)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (np.asarray, (self.__array__(),))  # an fd does not travel: the bytes do

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        if self.importer is None:
            raise AttributeError("this chunk is not on a CUDA device's GPU; read it with np.asarray")
        with self._lock:
            if not self._mapped:
                fd = self.memory.fd()
                try:
                    self._mapped.append(self.importer.import_fd(fd, self.memory.size))
                except BaseException:
                    os.close(fd)
                    raise
        return {"shape": self.shape, "typestr": self.dtype.str, "descr": [("", self.dtype.str)],
                "data": (self._mapped[0].pointer, False), "strides": None, "version": 3, "stream": None}

    def release(self) -> None:
        """Free the mapping and the exported memory now (no work may still read them)."""
        self._finalizer()


def _release(memory: ExportedResult, mapped: list[ImportedMemory]) -> None:
    for buffer in mapped:
        buffer.close()
    memory.free()


try:  # dask weighs chunks by sizeof; a device chunk weighs its bytes
    from dask.sizeof import sizeof

    sizeof.register(DeviceChunk)(lambda chunk: chunk.nbytes)
except ImportError:  # pragma: no cover - dask is a dependency
    pass
