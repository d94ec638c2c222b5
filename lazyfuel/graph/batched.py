"""Several output blocks per task and per program where results stay on the device (issue 18, W3).

A graph lowered under `lazyfuel.config._resident` (`persist(device=True)`, `compute(device=True)`)
runs one task per output block by default: each pays the host's per-task cost (planning, building
inputs, recording, a submit and a fence wait: ~2 ms on the H200 host, under the GIL), which over
resident blocks costs more than the kernels. `batched_layer` lowers such a group with k blocks
per task instead (`run_blocks`, returning a tuple; a `getitem` task per block keeps the Array's
keys and chunks as they were). `run_blocks` builds each block's inputs, plans once per distinct
signature (blocks of equal shape, dtype and layout share the plan), and records the programs of
the blocks whose inputs lie on one device on that device's pool (`BatchRunner.run_resident_many`:
each block's program submitted as soon as it is recorded, so the device starts on the first block
while the host records the next, the fences waited on at the end); each result stays one resident
block, reserved under the store's budget as `run_resident` reserves it. A compute to the host
over resident blocks (`lower_into`) is batched the same way (`store_blocks`: each block written
into its region of the result by the kernels where that region is contiguous,
`BatchRunner.run_many`); such a graph is not grouped by `task_bytes` (`graph.grouping`), which
would read the resident blocks as pieces.

Which blocks share a task: blocks are spread round-robin over the devices (`task.device_for`),
so a task takes blocks d, d + D, d + 2D, ... of one residue d modulo the D devices (adjacent
blocks of one device), never blocks of two devices. k is as many as keep at least one task per
dask worker thread (the scheduler's threads where the call knows them, `config._device_threads`,
else `graph.resident.device_workers`), at most `lazyfuel.config.device_task_bytes`
of result per task. A block that cannot join the batch (views only, a split, host rows
streamed, a select's source on the host, an output that is an input, a backend that runs no
batches) runs alone, as `task.run_block` runs it; so does every block of a batch that ran out of
device memory (a block too large is split there). While a batch runs, every input and output of
its k programs is pinned: a small `device_memory_budget` may be passed by up to k blocks until it
closes (the store is back under it after, as with k threads of one block each).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from lazyfuel.backends import base
from lazyfuel.backends.base import executor
from lazyfuel.graph import replay
from lazyfuel.graph.task import (
    BlockRecipe,
    Gathered,
    Runtime,
    block_holder,
    block_inputs,
    computed_block,
    finished,
    home_device,
    input_dtypes,
)
from lazyfuel.layout import Layout
from lazyfuel.planner.placement import Placement
from lazyfuel.settings import config


class BatchRunner(Protocol):
    """An executor (a `base.BlockHolder`) that runs several programs in one command buffer."""

    def run_resident_many(self, runs: Sequence[tuple[Any, Sequence[np.ndarray]]]) -> list[Any]: ...

    def run_many(self, runs: Sequence[tuple[Any, Sequence[np.ndarray]]],
                 outs: Sequence[Any] | None = None) -> list[np.ndarray]: ...


def blocks_per_task(count: int, block_bytes: int, workers: int, limit: int) -> int:
    """How many blocks of `block_bytes` one task runs, of `count` blocks of one device: as many as
    leave at least one task per worker thread, at most `limit` bytes (at least one block)."""
    if limit <= 0 or count <= 1:
        return 1
    by_threads = math.ceil(count / max(workers, 1))
    by_bytes = max(limit // max(block_bytes, 1), 1)
    return max(1, min(by_threads, by_bytes))


def task_numbers(count: int, devices: int, per_task: int) -> list[list[int]]:
    """The block numbers `0..count-1` cut into tasks: per residue modulo `devices` (one device's
    blocks, `task.device_for`), runs of up to `per_task` in order."""
    tasks = []
    for residue in range(max(devices, 1)):
        mine = list(range(residue, count, max(devices, 1)))
        tasks += [mine[i:i + per_task] for i in range(0, len(mine), per_task)]
    return tasks


def spread() -> tuple[int, int | None]:
    """(the devices blocks are spread over, dask threads a device graph runs on: None where no
    holder says) in this process; (1, None) where nothing keeps blocks."""
    from lazyfuel.graph.resident import device_workers

    try:
        backend, _ = block_holder(0)
    except RuntimeError:
        return 1, None
    return len(base.devices(backend)), device_workers()


def batched_layer(name: str, entries: Sequence[tuple[tuple[int, ...], BlockRecipe, list[Any]]],
                  runtime: Runtime, block_bytes: int, into: tuple[np.ndarray, list] | None = None,
                  workers: int | None = None) -> dict | None:
    """A layer computing `entries` (block index, recipe, task arguments; block numbers in order)
    with several blocks per task, or None where each task would hold one block (the caller lowers
    one task per block). Tasks are `run_blocks` with a `getitem` per block (keys as one task per
    block has them), or with `into` (the destination and each block's region) `store_blocks`
    tasks, keyed `(name, j)`. `workers`: the threads (else `config._device_threads`, else
    `graph.resident.device_workers`)."""
    limit = config.device_task_bytes
    if limit <= 0 or len(entries) < 2:
        return None
    devices, found = spread()
    workers = workers or config._device_threads or found or 1
    per_task = blocks_per_task(math.ceil(len(entries) / devices), block_bytes, workers, limit)
    if per_task <= 1:
        return None
    layer: dict = {}
    for j, numbers in enumerate(task_numbers(len(entries), devices, per_task)):
        recipes = tuple(entries[n][1] for n in numbers)
        args = [a for n in numbers for a in entries[n][2]]
        counts = tuple(len(entries[n][2]) for n in numbers)
        if into is not None:
            layer[(name, j)] = (store_blocks, recipes, runtime, into[0], [into[1][n] for n in numbers],
                                counts, *args)
            continue
        key = (f"{name}-batch", j)
        layer[key] = (run_blocks, recipes, runtime, counts, *args)
        for i, n in enumerate(numbers):
            layer[(name, *entries[n][0])] = (operator.getitem, key, i)
    return layer


def run_blocks(recipes: Sequence[BlockRecipe], runtime: Runtime, counts: Sequence[int],
               *args: Any) -> tuple[Any, ...]:
    """The task of several blocks: each block's result, in order (see the module docstring)."""
    return tuple(_results(recipes, runtime, _split(args, counts), [None] * len(recipes)))


def store_blocks(recipes: Sequence[BlockRecipe], runtime: Runtime, dest: np.ndarray,
                 regions: Sequence[tuple[slice, ...]], counts: Sequence[int], *args: Any) -> None:
    """The task of several blocks of a compute into one array (`task.store_block`'s): block j into
    `dest[regions[j]]`, by the kernels themselves where that region is contiguous."""
    targets = [dest[region] if dest.ndim else dest for region in regions]
    wanted = [t if r.chain is not None and not r.post and t.flags.c_contiguous else None
              for r, t in zip(recipes, targets)]
    for target, result in zip(targets, _results(recipes, runtime, _split(args, counts), wanted)):
        if result is not target:
            target[...] = result


def _split(args: Sequence[Any], counts: Sequence[int]) -> list[Sequence[Any]]:
    """`args` cut into the blocks' arguments, `counts[j]` for block j."""
    given, at = [], 0
    for n in counts:
        given.append(args[at:at + n])
        at += n
    return given


def _results(recipes: Sequence[BlockRecipe], runtime: Runtime, given: Sequence[Sequence[Any]],
             into: Sequence[np.ndarray | None]) -> list[Any]:
    """Each block's result (written into `into[j]` where given and the program's output fits);
    the blocks that may share a batch run in one per device and kind of result."""
    results: list[Any] = [None] * len(recipes)
    runs: dict[tuple, list[tuple[int, Any, list[Any], Any]]] = {}  # (position, program, inputs, out)
    runners: dict[tuple, Any] = {}
    plans: dict[tuple, Any] = {}
    for position, (recipe, block_args) in enumerate(zip(recipes, given)):
        found = _batchable(recipe, runtime, block_args, plans, into[position])
        if found is None:
            results[position] = computed_block(recipe, runtime, block_args, into[position])
            continue
        group, runner, program, inputs, out = found
        runners[group] = runner
        runs.setdefault(group, []).append((position, program, inputs, out))
    for group, batch in runs.items():
        if len(batch) > 1:
            try:
                with runtime.applied():
                    made = _run_batch(runners[group], group[1], batch)
            except MemoryError:  # one by one below: a block too large for the device is split
                made = None
            if made is not None:
                for (position, _, _, _), result in zip(batch, made):
                    results[position] = finished(recipes[position], result)
                if group[1] and len(batch) == len(recipes):  # the whole task kept as one batch
                    replay.note(tuple(recipes), runtime, runners[group],
                                [(program, inputs) for _, program, inputs, _ in batch], results)
                continue
        for position, _, _, _ in batch:
            results[position] = computed_block(recipes[position], runtime, given[position], into[position])
    return results


def _run_batch(runner: Any, keep: bool, batch: Sequence[tuple[int, Any, list[Any], Any]]) -> list[Any]:
    """The programs of `batch` in one command buffer: results kept on the device, or to the host."""
    runs = [(program, inputs) for _, program, inputs, _ in batch]
    if keep:
        return runner.run_resident_many(runs)
    return runner.run_many(runs, [out for _, _, _, out in batch])


def _host_source(recipe: BlockRecipe, args: Sequence[Any]) -> bool:
    """Whether a select's source of `recipe` is read from host chunks alone (W2's table): such a
    block never joins a batch, so its inputs are not built here only to be built again
    (`computed_block`: a spanning view and its indices, ~0.3 ms a block on the host)."""
    return any(isinstance(spec, Gathered) and all(isinstance(args[p.arg], np.ndarray) for p in spec.parts)
               for spec in recipe.inputs)


def _batchable(recipe: BlockRecipe, runtime: Runtime, args: Sequence[Any], plans: dict[tuple, Any],
               into: np.ndarray | None) -> tuple[tuple, Any, Any, list[Any], Any] | None:
    """((device, kept), the executor that runs the batch, the planned program, the inputs, the
    program's `out=` or None) where `recipe`'s block may join a batch: it reads blocks in device
    memory and its selects' sources lie there (nothing to stage or stream from the host), its
    program's output is a step's, and the executor of its device runs batches (`BatchRunner`);
    else None. Plans are shared through `plans` by signature."""
    if recipe.chain is None or math.prod(recipe.shape) == 0 or _host_source(recipe, args):
        return None
    inputs, sources, keep = block_inputs(recipe, runtime, args)
    keep = keep and into is None
    if not any(base.is_device_block(a) for a in inputs):
        return None
    if any(not base.is_device_block(inputs[s]) for s, _ in sources):
        return None
    with runtime.applied():
        placement = Placement.of([base.block_backend(a) for a in inputs],
                                 block_holder(recipe.block)[0] if keep else None)
        dtypes, layouts = input_dtypes(inputs), [Layout.of(a) for a in inputs]
        key = (recipe.chain, tuple(dtypes), tuple(layouts), placement)
        program = plans.get(key)
        if program is None:
            program = plans[key] = runtime.planner().plan(recipe.chain, dtypes, layouts, placement)
        if len(program.outputs) != 1 or program.outputs[0] < program.n_inputs:
            return None
        device = home_device(inputs, program.backend)
        if device is None:
            return None
        runner = base.holder(program.backend, device) if keep else executor(program.backend, device)
    if not callable(getattr(runner, "run_resident_many" if keep else "run_many", None)):
        return None  # not a `BatchRunner`
    out = None
    if into is not None:
        shape, dtype = program.value_meta(program.outputs[0])
        out = [into] if into.shape == tuple(shape) and into.dtype == dtype.numpy else None
    return (device, keep), runner, program, inputs, out
