"""What every backend provides to run programs, and the table the graph layer looks them up in.

A backend registers an `Executor` factory under its `Backend` name. `Executor.run` takes a
`Program` and the host arrays for its inputs (numpy arrays, possibly non-contiguous views whose
layouts equal `program.input_layouts`) and returns fresh contiguous numpy arrays for
`program.outputs`, after the whole program has run. It raises IndexError / MemoryError /
RuntimeError with a clear message on failure, and never returns partial output.
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


_FACTORIES: dict[Backend, Callable[[], Executor]] = {}
_EXECUTORS: dict[Backend, Executor] = {}


def register_executor(backend: Backend, factory: Callable[[], Executor]) -> None:
    """Register how to build `backend`'s executor; built lazily on first use, once per process."""
    if backend in _FACTORIES and _FACTORIES[backend] is not factory:
        raise ValueError(f"an executor for {backend} is already registered")
    _FACTORIES[backend] = factory


def executor(backend: Backend) -> Executor:
    """The process's executor for `backend` (built on first use)."""
    found = _EXECUTORS.get(backend)
    if found is None:
        if backend not in _FACTORIES:
            known = " ".join(b.name for b in _FACTORIES) or "none"
            raise LookupError(f"no executor registered for backend {backend}; registered: {known}")
        found = _EXECUTORS[backend] = _FACTORIES[backend]()
    return found
