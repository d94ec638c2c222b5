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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from lazyfuel.contracts.model import Backend
from lazyfuel.planner.program import Program

Outs = Sequence[np.ndarray | None] | None  # `out=` of `Executor.run`


class Executor(Protocol):
    """Runs programs on one backend (one device)."""

    backend: Backend

    def run(self, program: Program, inputs: Sequence[np.ndarray], out: Outs = None) -> list[np.ndarray]:
        """Run `program` on `inputs`; return the arrays for `program.outputs` (written into
        `out`'s arrays where given)."""
        ...


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
