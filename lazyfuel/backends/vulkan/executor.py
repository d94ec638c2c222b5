"""`VulkanExecutor`: runs a planner Program on the device pool as one command buffer.

Each host input's memory span (`memory_span`) is uploaded once; views are resolved on the device
by the program's Contiguize steps, whose params give the layout relative to that span. All steps
are recorded into one batch, with a barrier only before a step that reads what an earlier step
wrote since the last barrier (independent steps overlap on the GPU); intermediates stay on the device, and
only `program.outputs` come back, as fresh contiguous arrays, or into the `out=` arrays given
(imported and written by the last kernel in zero-copy mode, copied into by the device in import
mode, else downloaded into). The executor runs the program's steps as planned and decides
nothing: which kernel runs each op (an index_select and masked_fill as one `select_fill` dispatch,
say) is the planner's binding, and which inputs are read in place as streams the program's
(`Program.streamed_inputs`). Kernels that take indices record the first out-of-range position in
a status word; the executor then raises IndexError naming the value and its position, and
returns nothing. A lost device rebuilds the pool and retries once; a second loss is a
DeviceLostError saying so (the next run gets a fresh pool again).
Each run is recorded for `lazyfuel.profile()` (submits, dispatches, bytes moved, device time, and
the pool's label); while a profile is active, GPU timestamps around the steps (after the
uploads, before the downloads) also give `kernel_seconds`. For the judge, `time_kernels` runs a
program and returns that GPU time of its steps, and `time_transfer` the wall time of one batch
moving host bytes in and out the way the pool's transfer mode (`transfer_mode`) moves a
program's inputs and results. `VulkanExecutor(device=i)` runs on pool i of the spread list (`spread_slots`:
`LAZYFUEL_DEVICES`), `VulkanExecutor()` on the default device's pool. `export` runs a program of
one output into exportable device memory (`export.py`) that another API on the same GPU takes over,
and `export_gpu` names that GPU: together the `backends.base.MemoryExporter` capability.
`run_resident` keeps a program's result in the pool's memory as a `residency.ResidentBlock` and
`hold` puts a host array there (`backends.base.BlockHolder`: `persist(device=True)`); resident
blocks of the pool given as inputs are bound where they lie.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lazyfuel import profiling
from lazyfuel.backends.base import (
    CudaSource,
    Outs,
    deliver,
    destinations,
    input_fits,
    is_device_block,
    narrowed_indices,
)
from lazyfuel.backends.vulkan import host_gather, streamed, timestamps, transfer
from lazyfuel.backends.vulkan.check import DeviceLostError
from lazyfuel.backends.vulkan.export import EXTENSION, ExportedMemory, device_uuid, supported
from lazyfuel.backends.vulkan.kernels import STATUS_STRIDE, DeviceValue, StatusSlot, VulkanKernel
from lazyfuel.backends.vulkan.memory import Allocation
from lazyfuel.backends.vulkan.pool import DevicePool, get_pool, spread_slot
from lazyfuel.backends.vulkan.residency import ResidentBlock
from lazyfuel.backends.vulkan.shared import CUDA, cuda_may_import, hand_off
from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.layout import Layout
from lazyfuel.planner.program import Program, Step
from lazyfuel.settings import config

NO_BAD = 0xFFFFFFFF
SATURATED = NO_BAD - 1
# Programs of a batch (`run_resident_many`, `run_many`) per submit: each submit goes as soon as its
# programs are recorded, so the device starts on the first block while the host records the next.
PROGRAMS_PER_SUBMIT = 1


class VulkanExecutor:
    """Runs programs whose steps are all Vulkan bindings; see the module docstring."""

    backend = Backend.Vulkan

    def __init__(self, pool: DevicePool | None = None, device: int | None = None) -> None:
        """Run on `pool`; else on pool `device` of the spread list (`spread_slots()`), else on the
        default device's pool. The pool opens now, so a missing device shows here."""
        self._pool, self.device = pool, device
        if pool is None:
            self.pool  # noqa: B018 - opens the pool

    @property
    def pool(self) -> DevicePool:
        """The device pool programs run on (resolved at each run: `LAZYFUEL_DEVICES` may change)."""
        if self._pool is not None:
            return self._pool
        return get_pool() if self.device is None else get_pool(*spread_slot(self.device))

    def run(self, program: Program, inputs: Sequence[np.ndarray], out: Outs = None) -> list[np.ndarray]:
        """Run `program` on `inputs`; fresh contiguous arrays for `program.outputs` (or `out`'s
        arrays, written in place: see `backends.base`).

        Raises ValueError / TypeError for inputs or steps that do not fit the program, IndexError
        for an out-of-range index (value and position named), MemoryError when the device is full.
        """
        results, _ = self._run_retrying(program, inputs, out, profiling.active())
        return results

    def time_kernels(self, program: Program, inputs: Sequence[np.ndarray]) -> float | None:
        """Run `program` on `inputs` and return the GPU seconds of its steps alone (timestamps after
        the uploads and before the downloads); None where the device has no timestamps."""
        if not timestamps.supported(self.pool):
            self.run(program, inputs)
            return None
        _, seconds = self._run_retrying(program, inputs, None, True)
        return seconds

    @property
    def queue_count(self) -> int:
        """How many queues the pool submits programs to (`queues.py`): as many programs run at
        once on the device (`graph.resident.device_workers`)."""
        return len(self.pool.queues)

    @property
    def transfer_mode(self) -> str:
        """How the pool moves host arrays (`memtypes.Mode`: direct, staged, import, zero-copy)."""
        return self.pool.allocator.mode.value

    def time_transfer(self, upload: np.ndarray | None, result: np.ndarray | None) -> float:
        """Wall seconds of one batch that uploads `upload` and downloads into `result` (either may
        be None; both None: a submit and its wait) as programs move their inputs and results."""
        return transfer.time_round_trip(self.pool, upload, result)

    def _run_retrying(self, program: Program, inputs: Sequence[np.ndarray], out: Outs,
                      timed: bool) -> tuple[list[np.ndarray], float | None]:
        arrays, kernels = self._inputs(program, inputs)
        dests = destinations(program, out)
        try:
            return self._run(program, arrays, kernels, dests, timed=timed)
        except DeviceLostError:
            if self._pool is not None:
                raise
        label = self.pool.label  # a fresh pool now: get_pool replaces a lost one
        try:
            return self._run(program, arrays, kernels, dests, timed=timed)
        except DeviceLostError as again:
            raise DeviceLostError(again.call, again.result, f"the device {label} was lost twice "
                                  "running this program (the pool was rebuilt after each loss, and the "
                                  "next task runs on a fresh one)") from again

    def export_gpu(self) -> bytes | str:
        """The deviceUUID of the pool's GPU (what CUDA reports for it), or why the pool's device
        cannot export memory."""
        pool = self.pool
        if not supported(pool):
            return f"{pool.label} cannot export memory (no {EXTENSION})"
        return device_uuid(pool.physical)

    def export(self, program: Program, inputs: Sequence[np.ndarray]) -> ExportedMemory | np.ndarray:
        """Run a program of one output, leaving the result (C-contiguous, `program.value_meta`'s
        shape and dtype) in exportable device memory instead of bringing it back; the caller frees
        it. Where that cannot be (the device lacks VK_KHR_external_memory_fd, the output is a
        program input, the device was lost) the result comes back as `run` gives it. Raises as `run`.
        """
        arrays, kernels = self._inputs(program, inputs)
        pool = self.pool
        if len(program.outputs) != 1 or program.outputs[0] < program.n_inputs or not supported(pool):
            return self.run(program, arrays)[0]
        shape, dtype = program.value_meta(program.outputs[0])
        memory = ExportedMemory.allocate(pool, Layout.contiguous(shape).size * dtype.itemsize)
        try:
            self._run(program, arrays, kernels, [None], exported=memory.allocation,
                      timed=profiling.active())
        except DeviceLostError:
            memory.free()
            return self.run(program, arrays)[0]  # retried on a fresh pool, through host memory
        except BaseException:
            memory.free()
            raise
        return memory

    def run_resident(self, program: Program, inputs: Sequence[np.ndarray]) -> ResidentBlock | np.ndarray:
        """Run a program of one output, keeping the result in this pool's device memory as a
        `ResidentBlock` (under the pool's budget: `residency`); where the output is a program input
        the result comes back as `run` gives it (then `hold` it). Raises as `run`."""
        arrays, kernels = self._inputs(program, inputs)
        if len(program.outputs) != 1 or program.outputs[0] < program.n_inputs:
            return self.run(program, arrays)[0]
        shape, dtype = program.value_meta(program.outputs[0])
        block = ResidentBlock.reserve(self.pool, tuple(shape), dtype.numpy, shared=self._shared_result())
        try:
            self._run(program, arrays, kernels, [None], exported=block.allocation,
                      timed=profiling.active())
        except BaseException:
            block.free()
            raise
        block.done()
        return block

    def gather_up(self, source: np.ndarray, positions: np.ndarray,
                  into: ResidentBlock | None = None) -> ResidentBlock:
        """`source[positions]` along axis 0 gathered by the host straight into a new block of this
        pool, or into `into`, piece by piece through page-locked staging while earlier pieces
        upload (`streamed.gather_up`; the `base.RowStreamer` capability)."""
        return streamed.gather_up(self.pool, source, positions, shared=self._shared_result(), into=into)

    def gather_in_place(self, source: np.ndarray, positions: np.ndarray, checked: bool = False,
                        into: ResidentBlock | None = None) -> ResidentBlock | None:
        """`source[positions]` along axis 0 read by one kernel from `source`'s imported pages
        straight into a new block of this pool, or into `into` (`host_gather.gather_in_place`; the
        `base.RowReader` capability); None where that cannot run here. `checked`: the positions
        are known in range."""
        return host_gather.gather_in_place(self.pool, source, positions, shared=self._shared_result(),
                                           checked=checked, into=into)

    def result_block(self, shape: tuple[int, ...], dtype: np.dtype) -> ResidentBlock:
        """A new block of this pool for a whole `compute(device=True)` result, unwritten and pinned
        (`done()` unpins): exportable where CUDA may import it (`_shared_result`); its `part`s are
        the blocks tasks write in place (`base.BlockHolder.result_block`). MemoryError where it
        does not fit."""
        return ResidentBlock.reserve(self.pool, shape, dtype, shared=self._shared_result())

    def unkept_bytes(self, source: np.ndarray) -> int:
        """The bytes of `source`'s table `gather_in_place` would import now."""
        return host_gather.unkept_bytes(self.pool, source)

    def streamed_before(self, source: np.ndarray, mark: bool = False) -> bool:
        """`host_gather.StreamedTables.seen` on this pool's tables."""
        return host_gather.streamed_of(self.pool).seen(source, mark)

    def pieces(self, nbytes: int, row_bytes: int) -> int:
        """How many pieces (one submit each) `gather_up` moves a result of `nbytes` in: one where
        device memory is mapped (the rows are taken straight into it), else `streamed.pieces`."""
        if self.pool.allocator.direct:
            return 1 if nbytes else 0
        return streamed.pieces(nbytes, row_bytes)

    def _shared_result(self) -> bool:
        """Whether a kept result goes into memory CUDA can import: under `compute(device=True)`
        where CUDA may import it (`shared.cuda_may_import`: CUDA itself is not asked)."""
        return config._resident_shared and cuda_may_import(self.pool)

    def hold(self, array: np.ndarray) -> ResidentBlock:
        """`array` copied into a new `ResidentBlock` of this pool (a resident block of this pool
        as it is)."""
        if isinstance(array, ResidentBlock) and array.pool is self.pool:
            return array
        return ResidentBlock.upload(self.pool, np.asarray(array))

    def read_cuda(self, source: CudaSource, origin: tuple[int, ...], shape: tuple[int, ...]) -> ResidentBlock:
        """The `shape` region at `origin` of a CUDA array as a new block of this pool: CUDA copies
        it (device to device) into an exportable buffer it imports (`shared.py`); the
        `base.CudaReader` capability. NotImplementedError where the pool's GPU is not that CUDA
        device (`shared.hand_off` says why)."""
        found = hand_off(self.pool)
        if found.kind != CUDA or found.cuda_device != source.device:
            raise NotImplementedError(
                f"reading CUDA device {source.device}'s memory into {self.pool.label} needs the same GPU "
                f"shared with CUDA, and here {found.why}; copy it to the host first (torch: t.cpu(); "
                "CuPy: cupy.asnumpy(a))")
        from lazyfuel.backends.vkfft.external import copy_in
        from lazyfuel.backends.vulkan.device_array import _runs

        block = ResidentBlock.reserve(self.pool, shape, source.dtype, shared=True)
        try:
            assert block.shared_buffer is not None
            dst = block.shared_buffer.cuda_pointer(source.device)
            runs = [(at, n_block, n) for n_block, at, n in _runs(shape, origin, source.shape,
                                                                  source.dtype.itemsize)]
            copy_in(dst, source.pointer, source.device, runs, after=None)
        except BaseException:
            block.free()
            raise
        block.done()
        return block

    def assemble(self, blocks: Sequence[Any], chunks: tuple[tuple[int, ...], ...],
                 dtype: np.dtype, into: ResidentBlock | None = None) -> Any:
        """One `DeviceArray` of the whole result on this executor's pool (`device_array.assemble`),
        in `into` (a `result_block`) where given."""
        from lazyfuel.backends.vulkan.device_array import assemble

        return assemble(blocks, chunks, dtype, self.pool, into)

    def concatenate(self, parts: Sequence[tuple[Any, int, int]], axis: int) -> ResidentBlock | None:
        """Row ranges of blocks joined along `axis` into one resident block of this pool
        (`joined.joined`), or None where their rows are not contiguous bytes."""
        from lazyfuel.backends.vulkan.joined import joined

        return joined(self.pool, parts, axis)

    # -- checks ---------------------------------------------------------------------------------
    @classmethod
    def _inputs(cls, program: Program, inputs: Sequence[np.ndarray]) -> tuple[list[np.ndarray],
                                                                              list[VulkanKernel]]:
        """The inputs checked against the program, indices given in a wider integer dtype narrowed
        to U32 (the kernels read 32-bit words), and the steps' kernels."""
        arrays = [x if is_device_block(x) else np.asarray(x) for x in inputs]  # bound in place
        kernels = cls._validate(program, arrays)
        return [a if a.dtype == d.numpy else narrowed_indices(a)
                for a, d in zip(arrays, program.input_dtypes)], kernels

    @staticmethod
    def _validate(program: Program, arrays: list[np.ndarray]) -> list[VulkanKernel]:
        if len(arrays) != program.n_inputs:
            raise ValueError(f"program takes {program.n_inputs} inputs, got {len(arrays)}")
        for i, (a, dtype, layout) in enumerate(zip(arrays, program.input_dtypes, program.input_layouts)):
            if not input_fits(dtype, a):
                raise TypeError(f"input {i}: program expects {dtype} ({dtype.numpy}), got {a.dtype}")
            if tuple(a.shape) != layout.shape:
                raise ValueError(f"input {i}: program expects shape {layout.shape}, got {a.shape}")
        kernels = []
        n_values = program.n_inputs
        for i, step in enumerate(program.steps):
            impl = step.binding.kernel_ref.impl
            if not isinstance(impl, VulkanKernel):
                raise TypeError(f"step {i} ({step.binding}) is not a Vulkan kernel: {impl!r}")
            bad = [a for a in step.args if not 0 <= a < n_values]
            if bad:
                raise ValueError(f"step {i} reads value {bad[0]}, which is not defined before it")
            kernels.append(impl)
            n_values += 1
        bad_out = [v for v in program.outputs if not 0 <= v < n_values]
        if bad_out:
            raise ValueError(f"program output {bad_out[0]} is not a value of the program")
        return kernels

    @staticmethod
    def _check_caps(i: int, step: Step, args: list[DeviceValue | None]) -> None:
        """Each argument's layout is one the binding's caps accept (native_strided kernels read views).
        A Contiguize step reads the view its params give (not its argument's whole storage)."""
        layouts, fix = [None if a is None else a.layout for a in args], "insert a Contiguize step before it"
        if step.binding.op_kind is OpKind.Contiguize:
            p = step.param
            layouts = [Layout(tuple(p["shape"]), tuple(p["strides"]), int(p["offset"]))]
            fix = "copy it with a Contiguize binding whose caps accept it (the copy shader reads any view)"
        for k, (spec, layout) in enumerate(zip(step.binding.contract.inputs, layouts)):
            why = spec.layout.violation(layout) if layout.size else None
            if why is not None:
                raise ValueError(f"step {i} ({step.binding.op_kind}) argument {k} has layout {layout} "
                                 f"({why}); {fix}")

    # -- running --------------------------------------------------------------------------------
    def _run(self, program: Program, arrays: list[np.ndarray], kernels: list[VulkanKernel],
             dests: list[np.ndarray | None], exported: Allocation | None = None,
             timed: bool = False) -> tuple[list[np.ndarray], float | None]:
        """Record, submit, wait, deliver; with `exported`, the program's one output is written
        there and nothing comes back (an empty list). Also returns, when `timed` (and the device
        has timestamps), the GPU seconds of the steps, else None."""
        pool = self.pool
        timed = timed and timestamps.supported(pool)
        with pool.batch() as batch:
            status = _Status.of(batch, len(program.steps))
            recorded = self._record(batch, program, arrays, kernels, dests, exported, timed, timed, status)
            status.read_back(batch)
            batch.run()
            self._profiled(batch, [recorded], status)
            return recorded.delivered(), batch.kernel_seconds

    def run_resident_many(self, runs: Sequence[tuple[Program, Sequence[np.ndarray]]]
                          ) -> list[ResidentBlock]:
        """Several programs of one output each (`(program, inputs)`, say the blocks of one task over
        resident blocks) recorded one after another on this pool, each submitted as soon as it is
        recorded (`PROGRAMS_PER_SUBMIT` programs a command buffer and submit: the device runs
        block j while the host records j + 1), the fences waited on at the end; each result kept
        on the device as `run_resident` keeps it. Programs whose output is
        one of their inputs are refused (ValueError: the caller runs those one by one). Raises as
        `run`, but a lost device is not retried (the task fails: the resident inputs went with it)."""
        return self._run_many(runs, None, keep=True)

    def run_many(self, runs: Sequence[tuple[Program, Sequence[np.ndarray]]],
                 outs: Sequence[Outs] | None = None) -> list[np.ndarray]:
        """`run_resident_many` with each program's one result brought to the host: a fresh array,
        or written into `outs[j]` (as `run`'s `out=`) where given."""
        return self._run_many(runs, outs, keep=False)

    def _run_many(self, runs: Sequence[tuple[Program, Sequence[np.ndarray]]],
                  outs: Sequence[Outs] | None, keep: bool) -> list[Any]:
        """`run_resident_many` / `run_many`: the programs cut into submits of
        `PROGRAMS_PER_SUBMIT`, each submitted as soon as its programs are checked and recorded
        (the device works on the first while the host records the next), the fences waited on at
        the end, each batch closed and its kept results unpinned (`ResidentBlock.done`) as soon as
        its fence is waited on (its memory and pins go while the device runs the later ones).
        `lf.profile`'s device seconds add up to the first submit to the last fence, as one
        batch's."""
        if any(len(p.outputs) != 1 or p.outputs[0] < p.n_inputs for p, _ in runs):
            raise ValueError("a batch of programs runs programs whose one output is a step's")
        pool = self.pool
        timed = profiling.active() and timestamps.supported(pool)
        per = max(PROGRAMS_PER_SUBMIT, 1)
        blocks: list[ResidentBlock] = []
        opened: list[Any] = []  # batches not closed yet
        started: list[tuple[Any, list[_Recorded], _Status, list[ResidentBlock]]] = []  # and its blocks
        try:
            try:
                for first in range(0, len(runs), per):
                    group = [(program, *self._inputs(program, inputs))
                             for program, inputs in runs[first:first + per]]
                    batch = pool.batch()
                    opened.append(batch)
                    status = _Status.of(batch, sum(len(p.steps) for p, _, _ in group))
                    recorded = []
                    for j, (program, arrays, kernels) in enumerate(group, first):
                        clock = (timed and j == first, timed and j == first + len(group) - 1)
                        if keep:
                            shape, dtype = program.value_meta(program.outputs[0])
                            blocks.append(ResidentBlock.reserve(pool, tuple(shape), dtype.numpy,
                                                                shared=self._shared_result()))
                            out, dests = blocks[-1].allocation, [None]
                        else:
                            out, dests = None, destinations(program, None if outs is None else outs[j])
                        recorded.append(self._record(batch, program, arrays, kernels, dests, out, *clock,
                                                     status))
                    status.read_back(batch)
                    batch.start()
                    started.append((batch, recorded, status, blocks[first:first + len(group)]))
                results, waited = [], None
                while started:
                    batch, recorded, status, made = started.pop(0)
                    batch.finish()
                    if waited is not None:  # the batches overlap: count the time this one added
                        batch.device_seconds = min(batch.device_seconds, time.perf_counter() - waited)
                    waited = time.perf_counter()
                    self._profiled(batch, recorded, status)
                    results += [r.delivered() for r in recorded]
                    opened.remove(batch)
                    batch.close()
                    for block in made:  # written: unpinned while the device runs the later batches
                        block.done()
            except BaseException:
                for batch, _, _, _ in started:  # submitted, not waited on: it reads its memory
                    pool.wait(batch.context)
                raise
            finally:
                for batch in opened:
                    batch.close()
        except BaseException:
            for block in blocks:
                block.free()
            raise
        return list(blocks) if keep else [r[0] for r in results]

    def _record(self, batch: Any, program: Program, arrays: list[np.ndarray], kernels: list[VulkanKernel],
                dests: list[np.ndarray | None], exported: Allocation | None, begin: bool,
                end: bool, status: _Status) -> _Recorded:
        """Record `program`'s uploads, steps and downloads into `batch` (nothing is submitted);
        `begin` / `end`: start / stop the batch's kernel clock around these steps. The steps'
        status words are the next ones of `status` (the batch's: read back once by the caller)."""
        n_in = program.n_inputs
        values = transfer.upload_all(batch, arrays, program.input_dtypes, program.streamed_inputs)
        results_wanted = {v for v in program.outputs if v >= n_in}
        into = {v: d for v, d in zip(program.outputs, dests) if d is not None and v >= n_in}
        landed: dict[int, np.ndarray] = {}  # results the kernels wrote in place (zero-copy)
        first, flags = status.take(len(program.steps))
        if begin:
            batch.kernels_begin()
        unfenced: set[int] = set()  # values written since the last barrier
        reread = {a for step in program.steps for a in step.args}  # values later steps read
        checks = _checked_caps(program)
        for i, (step, kernel) in enumerate(zip(program.steps, kernels)):
            args = [values[a] for a in step.args]
            key = (i, tuple(None if a is None else a.layout for a in args))
            if key not in checks:
                self._check_caps(i, step, args)
                checks.add(key)
            if unfenced.intersection(step.args):
                batch.barrier()
                unfenced.clear()
            layout = Layout.contiguous(step.out_shape)
            wanted = len(values) in results_wanted
            if exported is not None and wanted:
                out, result = exported, None
            else:
                out, result = transfer.output(batch, layout.shape, step.out_dtype, wanted,
                                              into.get(len(values)), len(values) in reread)
            if result is not None:
                landed[len(values)] = result
            kernel.record(batch, step, args, out, StatusSlot(status.allocation, first + i))
            unfenced.add(len(values))
            values.append(DeviceValue(out, step.out_dtype, layout))
        if unfenced:  # staging downloads copy on the device: they must see every write
            batch.barrier()
        if end:
            batch.kernels_end()
        results: list[np.ndarray] = []
        for v, dest in zip(program.outputs if exported is None else (), dests):
            if v < n_in:  # an input returned as it is: no device work needed
                results.append(np.array(arrays[v], order="C", copy=True) if dest is None else arrays[v])
                continue
            if v in landed:
                results.append(landed.pop(v))
                continue
            value = values[v]
            out_array = np.empty(value.layout.shape, value.dtype.numpy) if dest is None else dest
            transfer.download(batch, value.allocation, out_array)
            results.append(out_array)
        return _Recorded(self, program, kernels, values, arrays, results, dests, flags)

    def _profiled(self, batch: Any, recorded: Sequence[_Recorded], status: _Status) -> None:
        """Record the batch's run of the `recorded` programs for `lazyfuel.profile()` (the status
        words read back are not counted as downloaded)."""
        if not profiling.active():  # nothing would count it: skip gathering the names
            return
        status_bytes = status.flags.nbytes
        names = tuple(n for r in recorded for n in r.program.binding_names)
        profiling.record(programs=len(recorded), submits=1, dispatches=batch.dispatches,
                         bytes_uploaded=batch.bytes_uploaded,
                         bytes_downloaded=batch.bytes_downloaded - status_bytes,
                         device_seconds=batch.device_seconds,
                         kernel_seconds=batch.kernel_seconds or 0.0,
                         bindings=names,
                         device=self.pool.label, backend=Backend.Vulkan.name)

    @staticmethod
    def _index_error(pool: DevicePool, kernel: VulkanKernel, step: Step, indices: DeviceValue,
                     position: int, arrays: list[np.ndarray], value_id: int) -> IndexError:
        """Read the bad value back (from the host input, or the device) and build the error."""
        if value_id < len(arrays):
            flat = np.ascontiguousarray(arrays[value_id]).reshape(-1).view(np.uint32)
        else:
            flat = np.empty(indices.layout.size, np.uint32)
            with pool.batch() as batch:
                batch.download(indices.allocation, flat)
                batch.run()
        if position == SATURATED:  # past 2**32 - 2: the kernel could not say exactly where
            bound = _index_bound(step)
            position = int(np.argmax(flat >= bound))
        return kernel.index_error(step, position, int(flat[position]))


def _index_bound(step: Step) -> int:
    p = step.param
    if "source_dim_size" in p:  # a row select (index_select, select_fill)
        return int(p["source_dim_size"])
    return int((tuple(p["source_shape"]) or (1,))[int(p["dim"])])


@dataclass
class _Status:
    """The status words (`StatusSlot`s) of every step of the programs recorded into one batch:
    one allocation set to NO_BAD once, read back once after them (`read_back`), each program
    reading its own slots' words (`take`). One per batch, not per program: a batch of k programs
    records one fill, barrier and copy back instead of k (issue 18, W3)."""

    allocation: Allocation
    flags: np.ndarray  # the words once the batch has run: STATUS_STRIDE // 4 of them per slot
    used: int = 0

    @classmethod
    def of(cls, batch: Any, slots: int) -> _Status:
        """Room for `slots` status words (at least one), set to NO_BAD on the device."""
        nbytes = STATUS_STRIDE * max(slots, 1)
        allocation = batch.alloc(nbytes)
        batch.fill_u32(allocation, NO_BAD, nbytes)
        return cls(allocation, np.empty(nbytes // 4, np.uint32))

    def take(self, slots: int) -> tuple[int, np.ndarray]:
        """The first of the next `slots` slots, and the view of `flags` that holds their words."""
        first, self.used = self.used, self.used + slots
        per = STATUS_STRIDE // 4
        return first, self.flags[first * per:(first + slots) * per]

    def read_back(self, batch: Any) -> None:
        """Record the copy of the words into `flags`: after every program's steps and barrier."""
        batch.download(self.allocation, self.flags)


@dataclass
class _Recorded:
    """One program recorded into a batch: what `delivered()` needs once the batch has run."""

    executor: VulkanExecutor
    program: Program
    kernels: list[VulkanKernel]
    values: list[DeviceValue]
    arrays: list[np.ndarray]
    results: list[np.ndarray]
    dests: list[np.ndarray | None]
    flags: np.ndarray

    def delivered(self) -> list[np.ndarray]:
        """The results (`deliver`ed into `dests`); IndexError naming the first bad index a step saw."""
        program = self.program
        for i, flag in enumerate(self.flags[:: STATUS_STRIDE // 4][:len(program.steps)]):
            if flag != NO_BAD:
                step = program.steps[i]
                raise self.executor._index_error(self.executor.pool, self.kernels[i], step,
                                                 self.values[step.args[1]], int(flag), self.arrays,
                                                 step.args[1])
        return deliver(self.results, self.dests)


def _checked_caps(program: Program) -> set[tuple]:
    """The (step, argument layouts) whose caps `program`'s steps passed already: `_check_caps`
    runs once per program and layouts, not on every run. Kept in the program's own `__dict__` (as
    its cached properties are: a frozen dataclass), so it goes with the program."""
    return program.__dict__.setdefault("_vulkan_caps_checked", set())
