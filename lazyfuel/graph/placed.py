"""A `compute(device=True)` result's one allocation, reserved before its tasks run (issue 18, W2).

`compute(device=True)` returns one `DeviceArray` of the whole result. Its blocks used to be
computed each into an allocation of its own and then copied into the result's one allocation
(`device_array.assemble`: 1.6 ms on the H200 for W2's 1 GiB, after the last kernel). Instead,
before the tasks run, the graph reserves that allocation (`placing`: the holder's
`result_block`, exportable where CUDA may import it), and each task of the result's last layer
whose block is one contiguous run of the C-order result (`graph.resident.plan_of`: a block split
along its first axis only, or covering the trailing axes whole) finds its byte range there
(`part_for(recipe)`: a `part` of the result block, which keeps that block alive and frees nothing
itself). A task that
reads its rows in place (`touched.streamed_where_cheaper` -> `base.RowReader.gather_in_place(into=)`)
or streams them up (`base.RowStreamer.gather_up(into=)`) writes straight into it; the assembly
then copies only the blocks that are not their part lying in place, so where every block is,
nothing is copied after the last kernel and the DeviceArray is the reserved allocation itself
(a streamed W2 compute once made its result twice, the parts and the whole: 2 GiB of device
memory on its first compute, then a copy). Every other block (a program's result, another
device's, uneven or non-contiguous regions) is assembled as before.

Only for `compute(device=True)` on one device (`lazyfuel.config.devices` of one: a task on another
device could not write into this one's memory), on dask's local schedulers (the tasks run in this
process): `persist(device=True)` keeps its blocks separately freeable and spillable and never
places. A task finds its part by its recipe's identity (the `BlockRecipe` object the graph node
passes), registered for the duration of one compute; a second compute of the same graph running
meanwhile on another thread finds its recipes taken and assembles as before.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from lazyfuel.graph.task import BlockRecipe

_LOCK = threading.Lock()
_PARTS: dict[int, tuple[Any, int, tuple[int, ...]]] = {}  # id(recipe) -> (result block, byte offset, shape)


@dataclass(frozen=True)
class Plan:
    """Where the last layer's blocks lie in the C-order result: (recipe, byte offset) of each block
    that is one contiguous run of it (the recipes held, so their ids stay theirs)."""

    shape: tuple[int, ...]
    dtype: np.dtype
    places: tuple[tuple[BlockRecipe, int], ...]


@contextmanager
def placing(plan: Plan | None, holder: Any) -> Iterator[Any | None]:
    """Inside, the tasks of `plan`'s recipes find their parts of one new result block of
    `holder` (`base.BlockHolder.result_block`), which is given (None where nothing is placed: no
    plan, no room for the whole result, or the recipes taken by a compute running meanwhile).
    The block's reservation is released on exit (the DeviceArray made of it pins it itself)."""
    if plan is None or not callable(getattr(holder, "result_block", None)):
        yield None
        return
    ids = [id(recipe) for recipe, _ in plan.places]
    with _LOCK:
        if any(i in _PARTS for i in ids):
            whole = None
        else:
            try:
                whole = holder.result_block(plan.shape, plan.dtype)
            except MemoryError:  # the assembly says so, naming sizes, as before
                whole = None
            if whole is not None:
                for recipe, offset in plan.places:
                    _PARTS[id(recipe)] = (whole, offset, recipe.shape)
    if whole is None:
        yield None
        return
    try:
        yield whole
    finally:
        with _LOCK:
            for i in ids:
                _PARTS.pop(i, None)
        whole.done()


def part_for(recipe: BlockRecipe) -> Any | None:
    """The part of the result block being placed where `recipe`'s block lies (a device block of
    the recipe's shape), or None where it is not placed."""
    found = _PARTS.get(id(recipe))
    if found is None:
        return None
    whole, offset, shape = found
    return whole.part(offset, shape)
