"""Persisting an array's blocks in device memory (`Array.persist(device=True)`, issue 18 item 1).

`on_device(arr, runtime)` is the lowered dask array of a graph whose block tasks ran under
`lazyfuel.config._resident` (a Vulkan program then keeps its result on the device:
`BlockHolder.run_resident`), with one more step per block, `hold_block`, which passes a block
already resident on one of the devices blocks are spread over on as it is (placement follows the
inputs: a task runs where its resident inputs lie, `task.home_device`, and its result stays
there) and copies any other block (one computed on the Cpu, a source chunk, a view) into the
device memory of block i's device, `task.device_for(i, Vulkan)`: round-robin, the device block i
of a later graph over it runs on when the chunking stays. Persisting that
array leaves a dask graph holding small handles (`backends.vulkan.residency.ResidentBlock`), not
numpy arrays; under dask.distributed each worker holds the blocks it computed on its own devices
(a handle that must travel is pickled as its bytes).

`held_blocks(arr)` gives the handles of such a persisted array in block order (row-major), which
`compute(device=True)` assembles into one `DeviceArray` (`assembled`): on the device the caller
names (`compute(device=1)`), else on the device holding most of the result's bytes (the lowest
number on a tie: device 0 for an even round-robin spread, as torch's and CuPy's current device).

`from_cuda(a, chunks)` is the same kind of dask array for a CUDA DLPack producer (a torch or CuPy
tensor on the GPU): each block copied device to device into the device memory of block i's
device (`base.CudaReader`), at once, so the tensor may change afterwards.
"""

from __future__ import annotations

import math
import operator
import os
import uuid
from collections.abc import Hashable, Mapping
from itertools import product
from typing import Any

import dask.array as da
import numpy as np
from dask.core import flatten

from lazyfuel import dlpack
from lazyfuel.backends import base
from lazyfuel.backends.base import CudaSource
from lazyfuel.contracts.model import Backend
from lazyfuel.graph.batched import run_blocks
from lazyfuel.graph.placed import Plan
from lazyfuel.graph.task import BlockRecipe, Runtime, block_holder, home_device, run_block

MIN_DEVICE_WORKERS = 4  # threads for a graph whose results stay on the devices, at least


def device_workers() -> int | None:
    """Dask threads for a graph whose results stay in device memory (`persist(device=True)`,
    `compute(device=True)`) on dask's threaded scheduler: one per queue the devices run programs
    on (`queue_count` of the block holder of each device), at least `MIN_DEVICE_WORKERS`, at
    most the CPUs; None where no holder says (dask's default, a thread per CPU, stays). Each such
    task's work on the host is Python under the GIL (~2 ms a 1 GiB block on the H200 host): more
    threads than the device runs programs at once only wait for the GIL and for each other's
    queues (BENCHMARKS.md, "data_path W3, session 7": 4 threads 33 ms, 16 threads 39 ms)."""
    try:
        backend, first = block_holder(0)
    except RuntimeError:  # nothing keeps blocks here: persist(device=True) says so itself
        return None
    counts = [getattr(first, "queue_count", None)]
    counts += [getattr(base.holder(backend, i), "queue_count", None)
               for i in range(1, len(base.devices(backend)))]
    if any(not isinstance(n, int) for n in counts):
        return None
    return min(os.cpu_count() or 1, max(MIN_DEVICE_WORKERS, sum(counts)))


def _holder(number: int, home: tuple[Backend, int] | None = None) -> base.BlockHolder:
    """The executor that keeps block `number` in device memory (`task.block_holder`): on device
    `home` where given (a block's `base.block_home`), else on block `number`'s device."""
    return block_holder(number, home)[1]


def hold_block(chunk: Any, runtime: Runtime, numblocks: tuple[int, ...],
               block_id: tuple[int, ...] = ()) -> Any:
    """`chunk` as a block in device memory: as it is where it lies on a device blocks are spread
    over already, else copied to its block number's device (`_holder`)."""
    number = int(np.ravel_multi_index(block_id, numblocks)) if numblocks else 0
    runtime.planner()  # the process's backends registered (as a block task's planning does)
    with runtime.applied():
        return _holder(number, base.block_home(chunk)).hold(chunk)


def assembled(held: da.Array, device: int | None = None, into: Any = None) -> Any:
    """One array in device memory of `held` (persisted by `on_device`): on device number `device`
    (of the backend holding the blocks), else where most of its bytes lie (`result_device`); in
    `into` (the result block `placed.placing` reserved on the device it names) where given.
    IndexError naming the devices there are for a number that names none."""
    blocks = held_blocks(held)
    home = next((h for h in map(base.block_home, blocks) if h is not None), None)
    if device is None:
        device = result_device(blocks)
    elif home is not None and not 0 <= device < len(base.devices(home[0])):
        names = base.devices(home[0])
        raise IndexError(f"compute(device={device}): the result can go to device 0..{len(names) - 1} "
                         f"of {home[0].name} ({', '.join(names)}: lazyfuel.config.devices, "
                         "LAZYFUEL_DEVICES)")
    holder = _holder(device, None if home is None else (home[0], device))
    if into is not None and base.block_home(into) == (home[0] if home else None, device):
        return holder.assemble(blocks, held.chunks, held.dtype, into)
    return holder.assemble(blocks, held.chunks, held.dtype)


def result_holder(device: int | None) -> Any | None:
    """The holder a `compute(device=...)` result is placed on before its tasks run
    (`placed.placing`): device `device` (0 for None) where blocks are kept on exactly one device,
    else None (over several, the result goes where most bytes end up: `assembled` decides)."""
    try:
        backend, first = block_holder(0)
    except RuntimeError:
        return None
    if len(base.devices(backend)) != 1 or device not in (None, 0):
        return None
    return first


def contiguous_offset(block: tuple[int, ...], origin: tuple[int, ...], shape: tuple[int, ...]) -> int | None:
    """The element offset in a C-order array of `shape` of a C-order block of shape `block` at
    `origin`, where the block's elements are one contiguous run there (every axis after its first
    longer than 1 covered whole); else None."""
    first = next((k for k, n in enumerate(block) if n > 1), len(block))
    if any(block[k] != shape[k] for k in range(first + 1, len(block))):
        return None
    return sum(o * math.prod(shape[k + 1:]) for k, o in enumerate(origin))


def _recipe_of(graph: Mapping[Hashable, Any], key: Hashable) -> BlockRecipe | None:
    """The recipe of the task computing `key`: a `run_block` task's, or the one a `getitem` takes
    from a `run_blocks` task's tuple; None for any other task."""
    node = graph.get(key)
    if not isinstance(node, tuple) or not node:
        return None
    if node[0] is run_block and isinstance(node[1], BlockRecipe):
        return node[1]
    if node[0] is operator.getitem and len(node) == 3 and isinstance(node[2], int):
        batch = graph.get(node[1])
        if isinstance(batch, tuple) and batch and batch[0] is run_blocks and node[2] < len(batch[1]):
            return batch[1][node[2]]
    return None


def plan_of(arr: da.Array) -> Plan | None:
    """The `Plan` of the lowered `arr` (its last layer's tasks), or None where no block can be
    written in its place (a task of another kind, a view after the program, an empty result), or
    that needs no placing: a one-block result is its block (the assembly hands it over as it is),
    where placing would reserve a second allocation of it and copy a program's block into that
    (W4 on the H200: 2.1 -> 3.0 ms a 1 GiB compute)."""
    shape, dtype = tuple(int(n) for n in arr.shape), np.dtype(arr.dtype)
    if not math.prod(shape) or arr.npartitions == 1:
        return None
    graph = dict(arr.__dask_graph__())
    starts = [np.concatenate(([0], np.cumsum(c)))[:-1] for c in arr.chunks]
    places = []
    for key in flatten(arr.__dask_keys__()):
        where = key[1:]
        block = tuple(int(c[i]) for c, i in zip(arr.chunks, where))
        recipe = _recipe_of(graph, key)
        if recipe is None or recipe.post or recipe.shape != block or np.dtype(recipe.dtype) != dtype \
                or not math.prod(block):
            continue
        offset = contiguous_offset(block, tuple(int(s[i]) for s, i in zip(starts, where)), shape)
        if offset is not None:
            places.append((recipe, offset * dtype.itemsize))
    return Plan(shape, dtype, tuple(places)) if places else None


def result_device(blocks: list[Any]) -> int:
    """The device number holding most bytes of `blocks` (the lowest on a tie; 0 where none says)."""
    homes = [base.block_home(b) for b in blocks]
    backend = next((h[0] for h in homes if h is not None), None)
    found = None if backend is None else home_device(blocks, backend)
    return 0 if found is None else found


def on_device(arr: da.Array, runtime: Runtime) -> da.Array:
    """`arr` (lowered under `config(_resident=True)`) with every block held on a device."""
    meta = np.empty((0,) * arr.ndim, arr.dtype)
    return arr.map_blocks(hold_block, runtime, arr.numblocks, dtype=arr.dtype, meta=meta,
                          name=f"lazyfuel-hold-{arr.name}")


def held_blocks(arr: da.Array) -> list[Any]:
    """The chunks a persisted `arr`'s graph holds, row-major (the device blocks of `on_device`)."""
    graph = arr.__dask_graph__()
    blocks = [graph[key] for key in flatten(arr.__dask_keys__())]
    if not all(base.is_device_block(b) for b in blocks):
        kinds = sorted({type(b).__name__ for b in blocks if not base.is_device_block(b)})
        raise RuntimeError(f"compute(device=True) needs the blocks in this process, and the graph holds "
                           f"{', '.join(kinds)} (dask.distributed keeps them on its workers); it runs "
                           "on dask's local schedulers: use persist(device=True) on a cluster")
    return blocks


def cuda_source(a: Any) -> tuple[CudaSource, Any]:
    """The CUDA array a DLPack producer on a CUDA device exports, and the capsule that keeps its
    memory valid (hold it until the copies are done). Asked for the legacy default stream, so its
    pending work is ordered before copies on that stream; TypeError for a strided tensor."""
    capsule = a.__dlpack__(stream=1)
    pointer, (kind, number), shape, strides, dtype = dlpack.read(capsule)
    if kind != dlpack.CUDA:
        raise TypeError(f"expected a tensor on a CUDA device, got one on {dlpack.NAMES.get(kind, kind)}")
    contiguous = tuple(math.prod(shape[k + 1:]) * dtype.itemsize for k in range(len(shape)))
    if any(s != c for s, c, n in zip(strides, contiguous, shape) if n > 1):
        raise TypeError(f"from_array reads C-contiguous CUDA tensors; this one has byte strides {strides} "
                        f"for shape {shape}: pass t.contiguous() (torch) or cupy.ascontiguousarray(a)")
    return CudaSource(pointer, number, shape, dtype), capsule


def from_cuda(a: Any, chunks: Any, runtime: Runtime) -> da.Array:
    """A dask array of device blocks holding a copy of the CUDA tensor `a`, cut into `chunks` (as
    dask's `from_array` takes them); see the module docstring."""
    source, capsule = cuda_source(a)
    chunks = da.core.normalize_chunks(chunks, source.shape, dtype=source.dtype)
    starts = [np.concatenate(([0], np.cumsum(c)))[:-1] for c in chunks]
    name = f"lazyfuel-cuda-{uuid.uuid4().hex}"
    graph = {}
    runtime.planner()  # the process's backends registered
    with runtime.applied():
        for number, where in enumerate(product(*(range(len(c)) for c in chunks))):
            reader = _holder(number)
            if not isinstance(reader, base.CudaReader):
                raise NotImplementedError(f"{type(reader).__name__} cannot read CUDA memory; copy the "
                                          "tensor to the host first (torch: t.cpu(); CuPy: cupy.asnumpy(a))")
            origin = tuple(int(s[i]) for s, i in zip(starts, where))
            shape = tuple(c[i] for c, i in zip(chunks, where))
            graph[(name, *where)] = reader.read_cuda(source, origin, shape)
    del capsule  # the producer's memory may go now: every block is a copy
    meta = np.empty((0,) * len(source.shape), source.dtype)
    return da.Array(graph, name, chunks, dtype=source.dtype, meta=meta)
