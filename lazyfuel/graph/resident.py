"""Persisting an array's blocks in device memory (`Array.persist(device=True)`, issue 18 item 1).

`on_device(arr, runtime)` is the lowered dask array of a graph whose block tasks ran under
`lazyfuel.config._resident` (a Vulkan program then keeps its result on the device:
`BlockHolder.run_resident`), with one more step per block, `hold_block`, which passes a block
already resident on its device on as it is and copies any other block (one computed on the Cpu, a
source chunk, a view) into the device memory of block i's device, `task.device_for(i, Vulkan)`:
the device block i of a later graph over it runs on when the chunking stays. Persisting that
array leaves a dask graph holding small handles (`backends.vulkan.residency.ResidentBlock`), not
numpy arrays; under dask.distributed each worker holds the blocks it computed on its own devices
(a handle that must travel is pickled as its bytes).

`held_blocks(arr)` gives the handles of such a persisted array in block order (row-major), which
`compute(device=True)` assembles into one `DeviceArray`.
"""

from __future__ import annotations

from typing import Any

import dask.array as da
import numpy as np
from dask.core import flatten

from lazyfuel.backends import base
from lazyfuel.graph.task import Runtime, block_holder


def _holder(number: int) -> base.BlockHolder:
    """The executor that keeps block `number` in device memory (`task.block_holder`)."""
    return block_holder(number)[1]


def hold_block(chunk: Any, runtime: Runtime, numblocks: tuple[int, ...],
               block_id: tuple[int, ...] = ()) -> Any:
    """`chunk` as a block in the device memory of its block number's device (`_holder`; as it is
    where it is there already)."""
    number = int(np.ravel_multi_index(block_id, numblocks)) if numblocks else 0
    runtime.planner()  # the process's backends registered (as a block task's planning does)
    with runtime.applied():
        return _holder(number).hold(chunk)


def assembled(held: da.Array) -> Any:
    """One array in device memory of `held` (persisted by `on_device`), on the device of its
    first block."""
    return _holder(0).assemble(held_blocks(held), held.chunks, held.dtype)


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
