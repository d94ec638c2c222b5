"""What every backend provides to run programs, and the table the graph layer looks them up in.

A backend registers an `Executor` factory under its `Backend` name. `Executor.run` takes a
`Program` and the host arrays for its inputs (numpy arrays, possibly non-contiguous views whose
layouts equal `program.input_layouts`) and returns fresh contiguous numpy arrays for
`program.outputs`, after the whole program has run. It raises IndexError / MemoryError /
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


class Executor(Protocol):
    """Runs programs on one backend (one device)."""

    backend: Backend

    def run(self, program: Program, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run `program` on `inputs`; return the arrays for `program.outputs`."""
        ...


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
