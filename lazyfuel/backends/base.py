"""What every backend provides to run programs, and the table the graph layer looks them up in.

A backend registers an `Executor` factory under its `Backend` name. `Executor.run` takes a
`Program` and the host arrays for its inputs (numpy arrays, possibly non-contiguous views whose
layouts equal `program.input_layouts`) and returns fresh contiguous numpy arrays for
`program.outputs`, after the whole program has run. With `out=` (one entry per output: a
C-contiguous array of the output's shape and dtype, or None) it writes those results into the
arrays given and returns them: a backend whose kernels can write there directly does so (no extra
pass over the result), the others copy (`deliver`). It raises IndexError / MemoryError /
RuntimeError with a clear message on failure, and never returns partial output.

A backend with several devices also registers `devices`, a function naming the devices it spreads
work over (e.g. the GPUs `LAZYFUEL_DEVICES` selects); `executor(backend, device=i)` is then the
process's executor for device i of that list, built by `factory(device=i)`, and `executor(backend)`
the one for the backend's default device. Backends registered without `devices` have one executor;
the device number is ignored for them.

Two optional capabilities let a result cross from one backend to another on the same GPU without
a host round trip (`graph.crossing`, decision 42); an executor has one by having its methods
(checked with `isinstance` against the runtime-checkable protocols below), and `exporter(backend)`
/ `importer(backend)` give the backend's executor where it has it, else why not:
- `MemoryExporter` (Vulkan): `export_gpu()` is the 16-byte UUID of the GPU its exported memory
  lives on, or a string saying why it cannot export; `export(program, inputs)` runs a program of
  one output into exportable device memory and returns an `ExportedResult` (`fd()` a new POSIX fd
  the importer takes over, `size` the bytes to import, `download(out)` into a C-contiguous numpy
  array, `free()` once every mapping is closed), or a numpy array where it could not export.
- `MemoryImporter` (Cuda): `import_gpu()` is the UUID of the GPU it maps memory on (or why it
  cannot); `import_fd(fd, size)` maps exported memory on that GPU and returns an `ImportedMemory`
  (`pointer` the device address, `close()` to unmap); it takes the fd over on success only.

A third keeps blocks on a device between computes (`Array.persist(device=True)`, issue 18):
- `BlockHolder` (Vulkan): `run_resident(program, inputs)` runs a program of one output and keeps
  the result in its device memory, returning a device block; `hold(array)` puts a host array
  there. A device block (`is_device_block`: its class sets `__lazyfuel_device_block__`, to its
  `Backend` where the planner should know where it lies: `block_backend`) has
  `shape`, `dtype`, `strides`, and `np.asarray(block)` downloads a copy: executors that cannot
  read it in place (Cpu) take it that way; `holder(backend, device)` gives the capability.
  Where its backend spreads over several devices, a device block also says where it lies
  (`home`: (backend, device number among `devices(backend)`), or None) and how its bytes reach
  another block's device (`reach(other)`: words for `lf.explain`); `block_home(value)` reads the
  first, so the graph runs a program where its resident inputs lie (`graph.task.home_device`).
  `reshape(shape)`, where present, sees the same bytes in another C-order shape (a gather's
  read task ravels its chunk so).
- `CudaReader` (Vulkan on a GPU CUDA shares): `read_cuda(source, origin, shape)` copies the region
  of a CUDA array (`CudaSource`: pointer, CUDA device, shape, dtype, C-contiguous) starting at
  `origin` into a new device block, device to device (`lf.from_array` of a torch / CuPy tensor).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

import numpy as np

from lazyfuel.contracts.model import Backend
from lazyfuel.dtypes import DType
from lazyfuel.planner.program import Program

Outs = Sequence[np.ndarray | None] | None  # `out=` of `Executor.run`
U32_MAX = 2**32 - 1
_C = TypeVar("_C")  # a capability protocol (`_capable`)


class Executor(Protocol):
    """Runs programs on one backend (one device)."""

    backend: Backend

    def run(self, program: Program, inputs: Sequence[np.ndarray], out: Outs = None) -> list[np.ndarray]:
        """Run `program` on `inputs`; return the arrays for `program.outputs` (written into
        `out`'s arrays where given)."""
        ...


class ExportedResult(Protocol):
    """A program's result left in exported device memory (see the module docstring)."""

    size: int

    def fd(self) -> int:
        """A new POSIX file descriptor for the memory; the caller owns it."""
        ...

    def download(self, out: np.ndarray) -> None:
        """Copy the result into `out` (C-contiguous, at most `size` bytes) and wait for it."""
        ...

    def free(self) -> None:
        """Release the memory (idempotent; nothing may still read it through this exporter)."""
        ...


class ImportedMemory(Protocol):
    """Exported memory mapped by an importer: `pointer` is its address on the importer's device."""

    pointer: int

    def close(self) -> None:
        """Unmap it (idempotent; no work may still read it)."""
        ...


@runtime_checkable
class MemoryExporter(Protocol):
    """An executor that can leave a program's result in memory another API on its GPU maps."""

    def export_gpu(self) -> bytes | str:
        """The 16-byte UUID of the GPU exported memory lives on, or why this executor cannot export."""
        ...

    def export(self, program: Program, inputs: Sequence[np.ndarray]) -> ExportedResult | np.ndarray:
        """Run `program` (one output) leaving its result exported; the result as `run` gives it
        where it cannot be exported. The caller frees what it gets."""
        ...


@runtime_checkable
class MemoryImporter(Protocol):
    """An executor that can map memory another API on its GPU exported."""

    def import_gpu(self) -> bytes | str:
        """The 16-byte UUID of the GPU this executor maps memory on, or why it cannot import (an
        exception raised here is taken as the reason too)."""
        ...

    def import_fd(self, fd: int, size: int) -> ImportedMemory:
        """Map `size` bytes (the exporter's `size`) behind `fd`; takes the fd over on success (the
        caller closes it otherwise)."""
        ...


@runtime_checkable
class BlockHolder(Protocol):
    """An executor that can keep blocks in its device's memory between computes."""

    def run_resident(self, program: Program, inputs: Sequence[np.ndarray]) -> object:
        """Run `program` (one output), keeping the result on the device: a device block (or a
        numpy array where it cannot keep it)."""
        ...

    def hold(self, array: np.ndarray) -> object:
        """`array` copied into the device's memory: a device block."""
        ...

    def assemble(self, blocks: Sequence[object], chunks: tuple[tuple[int, ...], ...],
                 dtype: np.dtype, into: object | None = None) -> object:
        """One array in this executor's device memory of the whole result whose blocks (row-major
        over `chunks`) are `blocks`, wherever they lie: what `compute(device=True)` returns. With
        `into` (a `result_block` of the whole result) the array is that block, and the blocks
        that are its `part`s in their places already are not copied."""
        ...

    def result_block(self, shape: tuple[int, ...], dtype: np.dtype) -> object:
        """A device block of this executor's device for a whole `compute(device=True)` result,
        unwritten and pinned until its `done()`; `block.part(offset, shape)` is the block of its
        bytes from `offset` on, which a task may write in place (`RowReader.gather_in_place(into=)`).
        MemoryError where it does not fit."""
        ...

    def concatenate(self, parts: Sequence[tuple[object, int, int]], axis: int) -> object | None:
        """Rows `lo:hi` along `axis` of each `(block, lo, hi)` (device blocks, wherever they lie,
        or host arrays) joined along `axis` into one device block of this executor's device; None
        where it cannot (the caller concatenates on the host)."""
        ...


@runtime_checkable
class RowStreamer(Protocol):
    """A `BlockHolder` that takes a select's rows from a host array straight into a new device
    block, the host gathering while the link uploads (issue 18 item 4: no host array of the
    result, no pageable upload)."""

    def gather_up(self, source: np.ndarray, positions: np.ndarray, into: object | None = None) -> object:
        """`source[positions]` along axis 0 (a C-contiguous host array, checked positions) as a
        device block (written into `into`, a block of this device of the result's shape and
        dtype, where given, and `into` returned)."""
        ...

    def pieces(self, nbytes: int, row_bytes: int) -> int:
        """How many pieces (one submit each) `gather_up` moves a result of `nbytes` in."""
        ...


@runtime_checkable
class RowReader(Protocol):
    """A `BlockHolder` whose kernels read a select's rows from a host array where it lies (its
    pages imported, kept for later computes) straight into a new device block (issue 18 item 4:
    no host gather, the rows cross the link once)."""

    def gather_in_place(self, source: np.ndarray, positions: np.ndarray, checked: bool = False,
                        into: object | None = None) -> object | None:
        """`source[positions]` along axis 0 (a C-contiguous host array) as a device block read by
        a kernel (written into `into`, a block of this device of the result's shape and dtype,
        where given, and `into` returned); or None where its rows cannot be read in place (then
        take another way). `checked`: every position is known to be in range (a task's inputs),
        so none is read again."""
        ...

    def unkept_bytes(self, source: np.ndarray) -> int:
        """The bytes of `source` that `gather_in_place` would import now (none kept yet)."""
        ...

    def streamed_before(self, source: np.ndarray, mark: bool = False) -> bool:
        """Whether a block of `source`'s table was streamed before, instead of read in place (then
        its import pays: the table is used again); with `mark`, one was just now."""
        ...


@dataclass(frozen=True)
class CudaSource:
    """A C-contiguous array in CUDA device memory: `pointer` on CUDA device `device`."""

    pointer: int
    device: int
    shape: tuple[int, ...]
    dtype: np.dtype


@runtime_checkable
class CudaReader(Protocol):
    """An executor that can copy CUDA device memory into device blocks of its own."""

    def read_cuda(self, source: CudaSource, origin: tuple[int, ...], shape: tuple[int, ...]) -> object:
        """The `shape` region of `source` at `origin` as a new device block (a device-to-device
        copy, finished when this returns); NotImplementedError naming why where it cannot."""
        ...


def is_device_block(value: object) -> bool:
    """Whether `value` is a block that lives in device memory (a resident block, a chunk left in
    exported memory): tasks pass it on as it is, and `np.asarray` downloads it."""
    return bool(getattr(type(value), "__lazyfuel_device_block__", False))


def block_backend(value: object) -> Backend | None:
    """The backend whose device memory holds `value` where its class says (a resident block's
    `__lazyfuel_device_block__` is its backend), else None: host memory, as the planner prices it."""
    found = getattr(type(value), "__lazyfuel_device_block__", None)
    return found if isinstance(found, Backend) else None


def block_home(value: object) -> tuple[Backend, int] | None:
    """(backend, device number) of the device a device block lies on, where its backend spreads
    over several devices and the block's device is one of them; None otherwise (a numpy array)."""
    home = getattr(value, "home", None) if is_device_block(value) else None
    return home if home is not None and home[1] is not None else None


def input_fits(declared: DType, a: np.ndarray) -> bool:
    """Whether `a` may be given for a program input of dtype `declared`: the same dtype, or, for
    U32 (indices), any integer dtype whose values the caller has range-checked. numpy's kernels
    take such indices as they are (np.take would convert U32 to intp itself); the Vulkan executor
    narrows them (`narrowed_indices`) as it moves them, so no pass is spent on them outside a run."""
    return a.dtype == declared.numpy or (declared is DType.U32 and a.dtype.kind in "iu")


def narrowed_indices(a: np.ndarray) -> np.ndarray:
    """Range-checked integer indices as a fresh C-contiguous U32 array, in one pass. Saturating:
    a value past 2**32 - 1 (only possible if the caller's array changed after the check) stays out
    of range for the kernel's own bounds check instead of wrapping onto a valid index."""
    if a.dtype == np.uint32:
        return np.ascontiguousarray(a)
    if a.dtype.kind == "i":  # seen unsigned, a negative value is huge: it saturates too
        a = a.astype(np.int64, copy=False).view(np.uint64)
    out = np.empty(a.shape, np.uint32)
    np.clip(a, 0, U32_MAX, out=out, casting="unsafe")
    return out


def destinations(program: Program, out: Outs) -> list[np.ndarray | None]:
    """`out` checked against `program.outputs`: one entry per output, each None or a writeable
    C-contiguous array of that output's shape and dtype (ValueError / TypeError otherwise)."""
    if out is None:
        return [None] * len(program.outputs)
    if len(out) != len(program.outputs):
        raise ValueError(f"out= has {len(out)} entries, the program has {len(program.outputs)} outputs")
    for i, (dest, value) in enumerate(zip(out, program.outputs)):
        if dest is None:
            continue
        shape, dtype = program.value_meta(value)
        if not isinstance(dest, np.ndarray) or dest.dtype != dtype.numpy:
            got = dest.dtype if isinstance(dest, np.ndarray) else type(dest).__name__
            raise TypeError(f"out[{i}] must be a numpy array of {dtype} ({dtype.numpy}), got {got}")
        if dest.shape != shape or not dest.flags.c_contiguous or not dest.flags.writeable:
            raise ValueError(f"out[{i}] must be a writeable C-contiguous array of shape {shape}; got "
                             f"shape {dest.shape}, contiguous={dest.flags.c_contiguous}, "
                             f"writeable={dest.flags.writeable}")
    return list(out)


def deliver(results: Sequence[np.ndarray], dests: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    """`results` with each one that has a destination copied into it (the destination returned)."""
    delivered = []
    for result, dest in zip(results, dests):
        if dest is not None and not _same_memory(dest, result):
            np.copyto(dest, result, casting="no")
        delivered.append(result if dest is None else dest)
    return delivered


def _same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether `b` is `a` (or a view of exactly `a`'s elements: a kernel wrote in place)."""
    return a is b or (a.shape == b.shape and a.strides == b.strides
                      and a.__array_interface__["data"][0] == b.__array_interface__["data"][0])


_FACTORIES: dict[Backend, Callable[..., Executor]] = {}
_DEVICES: dict[Backend, Callable[[], list[str]]] = {}
_EXECUTORS: dict[tuple[Backend, int | None], Executor] = {}


def register_executor(backend: Backend, factory: Callable[..., Executor],
                      devices: Callable[[], list[str]] | None = None) -> None:
    """Register how to build `backend`'s executor; built lazily on first use, once per process
    (once per device number when `devices` is given: see the module docstring)."""
    if backend in _FACTORIES and _FACTORIES[backend] is not factory:
        raise ValueError(f"an executor for {backend} is already registered")
    _FACTORIES[backend] = factory
    if devices is not None:
        _DEVICES[backend] = devices


def devices(backend: Backend) -> list[str]:
    """Labels of the devices `backend` spreads work over, in order; [] for a one-device backend."""
    found = _DEVICES.get(backend)
    return found() if found is not None else []


def executor(backend: Backend, device: int | None = None) -> Executor:
    """The process's executor for `backend` (built on first use); for a backend with several
    devices, the one for device number `device` of `devices(backend)` (None: its default)."""
    if backend not in _DEVICES:
        device = None
    key = (backend, device)
    found = _EXECUTORS.get(key)
    if found is None:
        if backend not in _FACTORIES:
            known = " ".join(b.name for b in _FACTORIES) or "none"
            raise LookupError(f"no executor registered for backend {backend}; registered: {known}")
        factory = _FACTORIES[backend]
        found = _EXECUTORS[key] = factory() if device is None else factory(device=device)
    return found


def exporter(backend: Backend, device: int | None = None) -> MemoryExporter | str:
    """`backend`'s executor (for `device`, as `executor`) where it is a `MemoryExporter`, else a
    string saying why not (it is not usable here, or it has no such capability)."""
    return _capable(backend, device, MemoryExporter, "cannot leave results in exportable device memory")


def importer(backend: Backend, device: int | None = None) -> MemoryImporter | str:
    """`backend`'s executor (for `device`, as `executor`) where it is a `MemoryImporter`, else a
    string saying why not (it is not usable here, or it has no such capability)."""
    return _capable(backend, device, MemoryImporter, "cannot map exported device memory")


def holder(backend: Backend, device: int | None = None) -> BlockHolder | str:
    """`backend`'s executor (for `device`, as `executor`) where it is a `BlockHolder`, else a
    string saying why not."""
    return _capable(backend, device, BlockHolder, "cannot keep blocks in device memory")


def _capable(backend: Backend, device: int | None, capability: type[_C], lacking: str) -> _C | str:
    try:
        found = executor(backend, device)
    except Exception as err:  # any reason the backend cannot run here is the reason
        return f"{backend.name} is not usable here: {err}"
    return found if _has(found, capability) else f"{backend.name} {lacking}"


_CAPABLE: dict[tuple[type, type], bool] = {}  # (executor class, capability) -> isinstance's answer


def _has(found: object, capability: type) -> bool:
    """`isinstance(found, capability)` (a runtime-checkable Protocol of methods), remembered per
    class of `found`: it walks the Protocol's members (~15 µs) and `block_holder` asks several
    times per resident block; an executor's methods are its class's."""
    key = (type(found), capability)
    known = _CAPABLE.get(key)
    if known is None:
        known = _CAPABLE[key] = isinstance(found, capability)
    return known
