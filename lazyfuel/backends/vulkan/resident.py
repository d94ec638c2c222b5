"""Device-resident runs: a Program's inputs uploaded to one pool once, then run many times.

`VulkanExecutor.run` uploads its inputs and downloads its outputs on every call, as a dask task
must. A pipeline whose data already lives on the GPUs (the multi-GPU benchmark; a loop that
re-runs the same selection) instead keeps everything on the device:

    programs = [ResidentProgram(pool, program, inputs) for inputs in blocks]   # upload once
    with ResidentBatch(pool, programs, reps=10) as run:   # recorded once: 10 x every program
        for _ in range(iterations):
            run()                                          # one submit, one fence wait
    outputs = programs[0].results()                        # download; IndexError on a bad index

Inputs, step outputs and the status words stay allocated until `free()`. Every step of every
program is recorded with a barrier after it, as the executor records one program, and results
are checked as the executor checks them, so they are the executor's bits.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lazyfuel.backends.vulkan.batch import Batch
from lazyfuel.backends.vulkan.executor import NO_BAD, VulkanExecutor, _index_bound
from lazyfuel.backends.vulkan.kernels import STATUS_STRIDE, DeviceValue, StatusSlot
from lazyfuel.backends.vulkan.memory import Allocation
from lazyfuel.backends.vulkan.pool import DevicePool
from lazyfuel.layout import Layout, memory_span
from lazyfuel.planner.program import Program


class ResidentProgram:
    """`program` with its inputs resident on `pool`; see the module docstring."""

    def __init__(self, pool: DevicePool, program: Program, inputs: Sequence[np.ndarray]) -> None:
        """Check the inputs against the program (as the executor does) and upload them."""
        arrays, self.kernels = VulkanExecutor._inputs(program, inputs)
        if any(v < program.n_inputs for v in program.outputs):
            raise ValueError("the program returns one of its inputs: nothing would run on the device")
        self.pool, self.program = pool, program
        self._held: list[Allocation] = []
        self.values: list[DeviceValue] = []
        try:
            for a, dtype in zip(arrays, program.input_dtypes):
                span = memory_span(a)
                allocation = self._alloc(span.nbytes)
                with pool.batch() as batch:
                    batch.upload(allocation, span)
                    batch.run()
                self.values.append(DeviceValue(allocation, dtype, Layout.of(a)))
            for step in program.steps:
                layout = Layout.contiguous(step.out_shape)
                out = self._alloc(layout.size * step.out_dtype.itemsize)
                self.values.append(DeviceValue(out, step.out_dtype, layout))
            self.status_bytes = STATUS_STRIDE * max(len(program.steps), 1)
            self.status = self._alloc(self.status_bytes)
            with pool.batch() as batch:
                batch.fill_u32(self.status, NO_BAD, self.status_bytes)
                batch.run()
        except BaseException:
            self.free()
            raise

    def _alloc(self, nbytes: int) -> Allocation:
        allocation = self.pool.allocator.alloc(max(nbytes, 1))
        self._held.append(allocation)
        return allocation

    @property
    def bytes_resident(self) -> int:
        """Device bytes this program holds (inputs, step outputs, status)."""
        return sum(a.size for a in self._held)

    def record(self, batch: Batch) -> None:
        """Record every step into `batch` (a batch of this program's pool), a barrier after each."""
        n_in = self.program.n_inputs
        for i, (step, kernel) in enumerate(zip(self.program.steps, self.kernels)):
            args = [self.values[a] for a in step.args]
            VulkanExecutor._check_caps(i, step, args)
            kernel.record(batch, step, args, self.values[n_in + i].allocation, StatusSlot(self.status, i))
            batch.barrier()

    def results(self) -> list[np.ndarray]:
        """Fresh arrays for `program.outputs` as the last run left them; IndexError (value and
        position named) if a kernel saw an index out of range in any run so far."""
        outputs: list[np.ndarray] = []
        flags = np.empty(self.status_bytes // 4, np.uint32)
        with self.pool.batch() as batch:
            for v in self.program.outputs:
                value = self.values[v]
                outputs.append(np.empty(value.layout.shape, value.dtype.numpy))
                batch.download(value.allocation, outputs[-1])
            batch.download(self.status, flags)
            batch.run()
        for i, flag in enumerate(flags[:: STATUS_STRIDE // 4][: len(self.program.steps)]):
            if flag != NO_BAD:
                step = self.program.steps[i]
                indices = self.values[step.args[1]]
                flat = np.empty(indices.layout.span, np.uint32)
                with self.pool.batch() as batch:
                    batch.download(indices.allocation, flat)
                    batch.run()
                position = int(flag) if flag < flat.size else int(np.argmax(flat >= _index_bound(step)))
                raise self.kernels[i].index_error(step, position, int(flat[position]))
        return outputs

    def free(self) -> None:
        """Give the device memory back (no run may be in flight)."""
        for allocation in self._held:
            self.pool.allocator.free(allocation)
        self._held.clear()


class ResidentBatch:
    """One command buffer holding `reps` runs of every program (all on `pool`), recorded once and
    submitted again on each call; a context manager that gives the batch back on exit."""

    def __init__(self, pool: DevicePool, programs: Sequence[ResidentProgram], reps: int = 1) -> None:
        wrong = [p for p in programs if p.pool is not pool]
        if wrong:
            raise ValueError(f"{len(wrong)} program(s) are resident on another pool than {pool.label}")
        if reps < 1:
            raise ValueError(f"reps must be at least 1, got {reps}")
        self.pool, self.programs, self.reps = pool, list(programs), reps
        self.batch = pool.batch()
        try:
            self.batch.reusable()
            for _ in range(reps):
                for program in self.programs:
                    program.record(self.batch)
        except BaseException:
            self.batch.close()
            raise
        self.dispatches = self.batch.dispatches
        self.runs = 0

    def __call__(self) -> float:
        """Submit the recorded work once and wait for it; the seconds from submit to fence."""
        self.batch.run()
        self.runs += 1
        return self.batch.device_seconds

    def close(self) -> None:
        """Give the recording context back (waits for nothing: each call already waited)."""
        self.batch.close()

    def __enter__(self) -> ResidentBatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
