"""How a result crosses from the Vulkan pool to the FFT provider: device to device, or through host.

A chain `gather -> masked_fill -> rfft` is two tasks (`graph.family`): the Vulkan task's result is
the FFT task's input. By default it comes back as a numpy chunk and the FFT provider uploads it
again (device -> host -> device on a GPU). Where the FFT runs on CUDA on the *same GPU* as the
Vulkan pool (deviceUUIDs equal), the Vulkan task instead leaves its result in exported device memory
(`backends/vulkan/export.py`) and hands over a `DeviceChunk`; the Cuda executor maps that memory
through CUDA (`backends/vkfft/external.py`, lazily, via `__cuda_array_interface__`) and reads it
where it lies. This module is the only one that knows both sides.

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

from lazyfuel.contracts.model import Backend
from lazyfuel.planner.program import Program

ENV = "LAZYFUEL_CROSSING"
MODES = ("auto", "host", "exported")
DEVICE_PAIRS = {(Backend.Vulkan, Backend.Cuda)}  # source -> target pairs that can share memory


def mode() -> str:
    """`LAZYFUEL_CROSSING` (default auto); ValueError naming the choices for anything else."""
    value = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if value not in MODES:
        raise ValueError(f"{ENV}={value!r}; expected one of {', '.join(MODES)}")
    return value


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
    if (source, target) not in DEVICE_PAIRS:
        return host(f"only {' and '.join(f'{s.name} -> {t.name}' for s, t in sorted(DEVICE_PAIRS))} "
                    "results can stay on the device")
    if isinstance(exporter, str):
        return host(exporter)
    if isinstance(importer, str):
        return host(importer)
    if exporter != importer:
        return host(f"different GPUs: {source.name} device {exporter.hex()}, {target.name} device "
                    f"{importer.hex()}")
    return Crossing(source, target, True, f"one GPU, {exporter.hex()}")


_cuda: dict[str, tuple[bytes | str, int | None]] = {}  # pool label -> (uuid or why not, CUDA index)
_lock = threading.Lock()


def _vulkan_side(pool: Any) -> bytes | str:
    from lazyfuel.backends.vulkan.export import device_uuid, supported

    if not supported(pool):
        return f"{pool.label} cannot export memory (no VK_KHR_external_memory_fd)"
    return device_uuid(pool.physical)


def _cuda_side() -> tuple[bytes | str, int | None]:
    """The Cuda FFT executor's GPU UUID and CUDA device number, or why there is none."""
    from lazyfuel.backends.base import executor

    try:
        device = executor(Backend.Cuda).device
        return device.uuid, device.index
    except Exception as err:  # any reason the Cuda side cannot run is a reason for host
        return f"Cuda is not usable here: {err}", None


def for_pool(pool: Any, target: Backend = Backend.Cuda) -> tuple[Crossing, int | None]:
    """The crossing from `pool`'s Vulkan device to `target`, and the CUDA device number to import
    on when it is device to device (cached per pool and mode)."""
    how = mode()
    key = f"{os.getpid()} {pool.label} {how} {target.name}"
    with _lock:
        if key not in _cuda:
            importer, index = _cuda_side() if target is Backend.Cuda else ("not a CUDA backend", None)
            _cuda[key] = (importer, index)
    importer, index = _cuda[key]
    found = decide(Backend.Vulkan, target, _vulkan_side(pool), importer, how)
    return found, index if found.device else None


def describe(source: Backend, target: Backend, rechunked: bool = False) -> str:
    """`explain`'s words for a result crossing from `source` to `target` here, `rechunked` on the
    way (opens the default Vulkan pool to ask where the pair can share memory)."""
    if rechunked:
        return Crossing(source, target, False, "it is rechunked on the host first").describe()
    if (source, target) in DEVICE_PAIRS and mode() != "host":
        from lazyfuel.backends.vulkan.pool import get_pool

        return for_pool(get_pool(), target)[0].describe()
    return decide(source, target, "", "", mode()).describe()


def may_hand_over(source: Backend | None, target: Backend | None) -> bool:
    """Whether lowering marks a `source` group read by a `target` group to hand over device memory
    (the task checks the devices when it runs)."""
    how = mode()
    if how == "host" or source is not Backend.Vulkan:
        return False
    return how == "exported" or (source, target) in DEVICE_PAIRS


def hand_over(executor: Any, program: Program, inputs: list[Any]) -> Any:
    """Run `program` on the Vulkan `executor`: a `DeviceChunk` where the crossing is device to
    device (or `LAZYFUEL_CROSSING=exported`), else its numpy result as `run` gives it."""
    crossing, index = for_pool(executor.pool)
    if not crossing.device and mode() != "exported":
        return executor.run(program, inputs)[0]
    got = executor.export(program, inputs)
    if isinstance(got, np.ndarray):
        return got
    shape, dtype = program.value_meta(program.outputs[0])
    return DeviceChunk(got, tuple(shape), dtype.numpy, index)


def is_device_chunk(value: Any) -> bool:
    """Whether `value` is a chunk left on the device (a task passes it on as it is)."""
    return isinstance(value, DeviceChunk)


class DeviceChunk:
    """A C-contiguous block result in exported Vulkan memory (see the module docstring).

    `np.asarray(chunk)` downloads it; `__cuda_array_interface__` (only where `cuda_device` is set)
    maps it for CUDA on first use, with no copy. The memory (and its CUDA mapping) is released
    when the chunk and every array made from it are gone.
    """

    def __init__(self, memory: Any, shape: tuple[int, ...], dtype: np.dtype, cuda_device: int | None) -> None:
        self.shape, self.dtype, self.cuda_device = shape, np.dtype(dtype), cuda_device
        self.memory = memory
        self._mapped: list[Any] = []  # the CUDA mapping, once made
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
            with self.memory.pool.batch() as batch:
                batch.download(self.memory.allocation, out)
                batch.run()
        return out if dtype is None else out.astype(dtype, copy=False)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (np.asarray, (self.__array__(),))  # an fd does not travel: the bytes do

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        if self.cuda_device is None:
            raise AttributeError("this chunk is not on a CUDA device's GPU; read it with np.asarray")
        with self._lock:
            if not self._mapped:
                from lazyfuel.backends.vkfft.external import ExternalBuffer

                fd = self.memory.fd()
                try:
                    self._mapped.append(ExternalBuffer.import_fd(fd, self.memory.size, self.cuda_device))
                except BaseException:
                    os.close(fd)
                    raise
        return {"shape": self.shape, "typestr": self.dtype.str, "descr": [("", self.dtype.str)],
                "data": (self._mapped[0].pointer, False), "strides": None, "version": 3, "stream": None}

    def release(self) -> None:
        """Free the CUDA mapping and the Vulkan memory now (no work may still read them)."""
        self._finalizer()


def _release(memory: Any, mapped: list[Any]) -> None:
    for buffer in mapped:
        buffer.close()
    memory.free()


try:  # dask weighs chunks by sizeof; a device chunk weighs its bytes
    from dask.sizeof import sizeof

    sizeof.register(DeviceChunk)(lambda chunk: chunk.nbytes)
except ImportError:  # pragma: no cover - dask is a dependency
    pass
