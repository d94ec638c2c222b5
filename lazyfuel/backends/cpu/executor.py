"""`CpuExecutor`: runs a planned `Program` step by step with the numpy kernels.

Values are numpy arrays: the program's inputs are the host arrays as given (views included), and
each step's output is the fresh contiguous array its kernel returns, reshaped to the step's shape.
A step whose result goes to an `out=` array is handed that array as its kernel's `out` where the
kernel takes one (the select family does), so the result is written once, in place.
Nothing runs lazily here; the graph layer calls `run` inside a task.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from functools import cache

import numpy as np

from lazyfuel import prep_gate, profiling
from lazyfuel.backends.base import Outs, deliver, destinations, input_fits
from lazyfuel.contracts.model import Backend
from lazyfuel.layout import Layout
from lazyfuel.planner.program import Program, Step


class CpuExecutor:
    """The Cpu backend's `Executor`: each step calls `step.binding.kernel_ref.impl(*args, **params)`.

    `run` checks that the inputs match the program (count, dtypes, layouts), runs every step, and
    returns fresh contiguous arrays for `program.outputs` (an output that is a program input is
    copied). A kernel's IndexError / TypeError / ValueError propagates with a note naming the step.
    """

    backend = Backend.Cpu

    def run(self, program: Program, inputs: Sequence[np.ndarray], out: Outs = None) -> list[np.ndarray]:
        """Run `program` on `inputs`; return the arrays for `program.outputs` (written into `out`'s
        arrays where given: see `backends.base`).

        Raises:
            ValueError: the inputs do not match the program (count, layout), or a step is not a
                Cpu binding, or a kernel returned the wrong dtype or size (a planner bug).
            TypeError: an input's dtype differs from the program's.
            IndexError: an index is out of range (from the kernel).
        """
        prep_gate.release()  # numpy kernels from here: another task may prepare
        values = self._check_inputs(program, inputs)
        dests = destinations(program, out)
        into = {v: d for v, d in zip(program.outputs, dests) if d is not None}
        for number, step in enumerate(program.steps):
            if step.binding.backend is not Backend.Cpu:
                raise ValueError(f"step {number} is bound to {step.binding} on {step.binding.backend}; "
                                 f"the Cpu executor runs Cpu bindings only")
            args = [values[i] for i in step.args]
            impl = step.binding.kernel_ref.impl
            dest = into.get(len(values))
            extra = {"out": dest} if dest is not None and _takes_out(impl) else {}
            try:
                result = impl(*args, **step.param, **extra)
            except (IndexError, TypeError, ValueError) as err:
                err.add_note(f"in step {number}: {step.binding} (args {step.args})")
                raise
            values.append(self._shaped(result, step, number))
        n = program.n_inputs
        profiling.record(programs=1, dispatches=len(program.steps), device="cpu",
                         backend=Backend.Cpu.name, bindings=program.binding_names)
        results = [np.array(values[i], order="C", copy=True) if i < n and dests[k] is None else values[i]
                   for k, i in enumerate(program.outputs)]
        return deliver(results, dests)

    @staticmethod
    def _check_inputs(program: Program, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        if len(inputs) != program.n_inputs:
            raise ValueError(f"the program takes {program.n_inputs} inputs, got {len(inputs)}")
        values = []
        for i, (a, dtype, layout) in enumerate(zip(inputs, program.input_dtypes, program.input_layouts)):
            a = np.asarray(a)
            if not input_fits(dtype, a):
                raise TypeError(f"input {i} has dtype {a.dtype}, the program expects {dtype} ({dtype.numpy})")
            got = Layout.of(a)
            if got != layout:
                raise ValueError(f"input {i} has layout {got}, the program was planned for {layout}")
            values.append(a)
        return values

    @staticmethod
    def _shaped(out: np.ndarray, step: Step, number: int) -> np.ndarray:
        expected = step.out_dtype.numpy
        if out.dtype != expected or out.size != math.prod(step.out_shape):
            raise ValueError(f"step {number} ({step.binding}) returned {out.dtype} {out.shape}, "
                             f"expected {expected} {step.out_shape}")
        out = np.asarray(out, order="C")
        return out if out.shape == step.out_shape else out.reshape(step.out_shape)


@cache
def _takes_out(kernel: Callable[..., object]) -> bool:
    """Whether a step function writes into an `out=` array it is given."""
    try:
        return "out" in inspect.signature(kernel).parameters
    except (TypeError, ValueError):
        return False
