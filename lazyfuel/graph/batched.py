"""Several output blocks per task and per program where results stay on the device (issue 18, W3).

A graph lowered under `lazyfuel.config._resident` (`persist(device=True)`, `compute(device=True)`)
runs one task per output block by default: each pays the host's per-task cost (planning, building
inputs, recording, a submit and a fence wait: ~2 ms on the H200 host, under the GIL), which over
resident blocks costs more than the kernels. `batched_layer` lowers such a group with k blocks
per task instead (`run_blocks`, returning a tuple; a `getitem` task per block keeps the Array's
keys and chunks as they were). `run_blocks` builds each block's inputs, plans once per distinct
signature (blocks of equal shape, dtype and layout share the plan), and records the programs of
the blocks whose inputs lie on one device into ONE command buffer of that device's pool
(`BatchRunner.run_resident_many`: one submit, one fence wait); each result stays one resident
block, reserved under the store's budget as `run_resident` reserves it.

Which blocks share a task: blocks are spread round-robin over the devices (`task.device_for`),
so a task takes blocks d, d + D, d + 2D, ... of one residue d modulo the D devices (adjacent
blocks of one device), never blocks of two devices. k is as many as keep at least one task per
dask worker thread (`graph.resident.device_workers`), at most `lazyfuel.config.device_task_bytes`
of result per task. A block that cannot join the batch (views only, a split, host rows
streamed, an output that is an input, a backend with no `run_resident_many`) runs alone, as
`task.run_block` runs it; so does every block of a batch that ran out of device memory.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from lazyfuel.backends import base
from lazyfuel.graph.task import (
    BlockRecipe,
    Runtime,
    _computed,
    _input_dtypes,
    block_holder,
    block_inputs,
    finished,
    home_device,
)
from lazyfuel.layout import Layout
from lazyfuel.planner.placement import Placement
from lazyfuel.settings import config


class BatchRunner(Protocol):
    """A `base.BlockHolder` that runs several programs in one command buffer, results kept."""

    def run_resident_many(self, runs: Sequence[tuple[Any, Sequence[np.ndarray]]]) -> list[Any]: ...


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
                  runtime: Runtime, block_bytes: int) -> dict | None:
    """A layer computing `entries` (block index, recipe, task arguments; block numbers in order)
    with several blocks per `run_blocks` task, or None where each task would hold one block (the
    caller lowers one task per block)."""
    limit = config.device_task_bytes
    if limit <= 0 or len(entries) < 2:
        return None
    devices, workers = spread()
    workers = config._device_threads or workers
    per_device = math.ceil(len(entries) / devices)
    per_task = blocks_per_task(per_device, block_bytes, workers or 1, limit)
    if per_task <= 1:
        return None
    layer: dict = {}
    for j, numbers in enumerate(task_numbers(len(entries), devices, per_task)):
        key = (f"{name}-batch", j)
        recipes = tuple(entries[n][1] for n in numbers)
        args = [a for n in numbers for a in entries[n][2]]
        counts = tuple(len(entries[n][2]) for n in numbers)
        layer[key] = (run_blocks, recipes, runtime, counts, *args)
        for i, n in enumerate(numbers):
            layer[(name, *entries[n][0])] = (operator.getitem, key, i)
    return layer


def run_blocks(recipes: Sequence[BlockRecipe], runtime: Runtime, counts: Sequence[int],
               *args: Any) -> tuple[Any, ...]:
    """The task of several blocks: each block's result, in order (see the module docstring)."""
    given, at = [], 0
    for n in counts:
        given.append(args[at:at + n])
        at += n
    results: list[Any] = [None] * len(recipes)
    runs: dict[int, list[tuple[int, Any, list[Any]]]] = {}  # device: (position, program, inputs)
    holders: dict[int, Any] = {}
    plans: dict[tuple, Any] = {}
    for position, (recipe, block_args) in enumerate(zip(recipes, given)):
        found = _batchable(recipe, runtime, block_args, plans)
        if found is None:
            results[position] = _computed(recipe, runtime, block_args, None)
            continue
        device, holder, program, inputs = found
        holders[device] = holder
        runs.setdefault(device, []).append((position, program, inputs))
    for device, batch in runs.items():
        if len(batch) == 1:
            position = batch[0][0]
            results[position] = _computed(recipes[position], runtime, given[position], None)
            continue
        try:
            with runtime.applied():
                blocks = holders[device].run_resident_many([(p, i) for _, p, i in batch])
        except MemoryError:  # one by one: a block too large for the device is split
            for position, _, _ in batch:
                results[position] = _computed(recipes[position], runtime, given[position], None)
            continue
        for (position, _, _), block in zip(batch, blocks):
            results[position] = finished(recipes[position], block)
    return tuple(results)


def _batchable(recipe: BlockRecipe, runtime: Runtime, args: Sequence[Any], plans: dict[tuple, Any]
               ) -> tuple[int, Any, Any, list[Any]] | None:
    """(device, its holder, the planned program, the inputs) where `recipe`'s block may join a
    batch: its result kept on a device whose holder runs batches, its program's output a step's,
    its selects' sources in device memory already (nothing to stage or stream from the host);
    else None. Plans are shared through `plans` by signature."""
    if recipe.chain is None or math.prod(recipe.shape) == 0:
        return None
    inputs, sources, resident = block_inputs(recipe, runtime, args)
    if not resident or not any(base.is_device_block(a) for a in inputs):
        return None
    if any(not base.is_device_block(inputs[s]) for s, _ in sources):
        return None
    with runtime.applied():
        backend = block_holder(recipe.block)[0]
        placement = Placement.of([base.block_backend(a) for a in inputs], backend)
        dtypes, layouts = _input_dtypes(inputs), [Layout.of(a) for a in inputs]
        key = (recipe.chain, tuple(dtypes), tuple(layouts), placement)
        program = plans.get(key)
        if program is None:
            program = plans[key] = runtime.planner().plan(recipe.chain, dtypes, layouts, placement)
        if len(program.outputs) != 1 or program.outputs[0] < program.n_inputs:
            return None
        device = home_device(inputs, program.backend)
        if device is None:
            return None
        holder = base.holder(program.backend, device)
    if not callable(getattr(holder, "run_resident_many", None)):  # not a `BatchRunner`
        return None
    return device, holder, program, inputs
