"""The body of a fused task: it turns real chunks into program inputs and runs one program.

A `BlockRecipe` says, for one output block, how to get each program input from the task's
arguments (the chunks dask hands in, in key order) and which `Chain` to plan:

- `Part`: a chunk with numpy views applied (transpose, strided or reversed slices, broadcast):
  free, so the planner sees the view's real layout and contiguizes only where a kernel's caps
  demand it;
- `Const`: a block of concrete indices, the snapshot checked and narrowed to the kernel's index
  dtype when the op was built (`graph.indices`), moved to a span's start in one copy;
- `LazyIndex`: a chunk of lazy indices, range-checked and narrowed here (IndexError naming the
  value and its position in the whole index array);
- `Gathered`: a select's source read from the chunks its indices hit (each once): one chunk as
  it is, several views of one buffer as one spanning view (no copy), else concatenated on the
  host; plus the indices remapped into it;
- `Assembled`: a select's source made of the pieces that per-source-chunk read tasks
  (`read_pieces`, recipe `Reader`) cut for this block, plus the permutation that puts them in place.

`run_block` plans the chain against the process's planner (cached per signature) and runs it with
one `executor(...).run` call: on Vulkan one command buffer and one submit, intermediates kept on
the device. Then numpy views the result if the recipe says so (`post`). When the device is out of
memory for the block, the chain runs on its halves instead (`graph.split`).

Several devices: each task runs on one device (a fused chain is one program, so it never leaves
it), chosen in the process that runs the task: where its program's resident inputs lie
(`home_device`: the device holding most of their bytes, so a graph over `persist(device=True)`
blocks runs where the blocks are and moves the fewest bytes between devices), else
`device_for(recipe.block, backend)`: the block's number (row-major, set when the graph is lowered)
modulo the number of devices the backend spreads over (`lazyfuel.config.devices`). Deterministic,
round-robin over neighbouring blocks, and block i of every group lands on the same device.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any, Protocol

import numpy as np

from lazyfuel import layout as layouts
from lazyfuel import prep_gate
from lazyfuel.backends import base
from lazyfuel.backends.base import executor
from lazyfuel.dtypes import DType
from lazyfuel.graph import crossing, kept_indices
from lazyfuel.graph.device_blocks import (  # noqa: F401 (re-exported)
    DevicePiece,
    block_holder,
    device_for,
    home_device,
    joined,
)
from lazyfuel.graph.ir import ViewOp
from lazyfuel.graph.placed import part_for
from lazyfuel.graph.span import spanning_view
from lazyfuel.graph.split import run_splitting
from lazyfuel.graph.task_inputs import (  # noqa: F401 (re-exported)
    ArgMeta,
    Assembled,
    Const,
    Gathered,
    InputSpec,
    LazyIndex,
    Part,
    Signature,
    apply_views,
    view_layout,
)
from lazyfuel.graph.touched import staged_where_cheaper, streamed_where_cheaper
from lazyfuel.layout import Layout
from lazyfuel.planner import Chain, OpNode, Planner
from lazyfuel.planner.placement import Placement
from lazyfuel.settings import config


class Runtime(Protocol):
    """What a task needs from the layer above (a picklable handle): the planner of this process,
    and the config values the task runs under."""

    def planner(self) -> Planner: ...

    def applied(self) -> AbstractContextManager[Any]: ...


def spanned(recipe: BlockRecipe, args: list[Any], spans: dict[tuple, Any]) -> BlockRecipe:
    """`recipe` with each `Gathered` input whose parts are views of one buffer given as one
    spanning view, computed here once (and once per distinct set of parts, through `spans`)
    instead of in every task: for a graph whose chunks are held (`args` are the chunks, not keys).
    The view is appended to `args`; the parts' own arguments stay (unread)."""
    inputs, changed = list(recipe.inputs), False
    for i, spec in enumerate(inputs):
        if not isinstance(spec, Gathered) or len(spec.parts) < 2 or not spec.spannable:
            continue
        if not all(isinstance(args[p.arg], np.ndarray) for p in spec.parts):
            continue
        ident = (tuple(id(args[p.arg]) for p in spec.parts), tuple(p.views for p in spec.parts),
                 spec.part_starts, spec.axis)
        if ident not in spans:
            spans[ident] = spanning_view([p.arrays(args)[0] for p in spec.parts], spec.part_starts,
                                         spec.axis, spec.gap)
        if spans[ident] is None:
            continue
        args.append(spans[ident])
        inputs[i] = replace(spec, parts=(Part(len(args) - 1),), part_starts=spec.part_starts[:1])
        changed = True
    return replace(recipe, inputs=tuple(inputs)) if changed else recipe


@dataclass(frozen=True, eq=False)
class Reader:
    """One read task of a select read per source chunk (see `graph.pieces`).

    `part` is the source chunk (task argument 0, numpy views applied); `positions` (the
    kernels' index dtype) are the rows along `axis` that every output block needs from it,
    grouped by block (piece j is `positions[bounds[j]:bounds[j + 1]]`), or element offsets into
    the raveled chunk when `flat`.
    `block` is the read task's number, which picks its device (`device_for`).
    """

    part: Part
    positions: np.ndarray
    bounds: tuple[int, ...]
    axis: int
    flat: bool
    block: int = 0

    def chain(self) -> Chain:
        """One IndexSelect of the chunk (raveled when `flat`) at `positions`."""
        dim = 0 if self.flat else self.axis
        return Chain(2, (OpNode("IndexSelect", (0, 1), (("dim", dim),)),), (2,))


def read_pieces(reader: Reader, runtime: Runtime, *args: Any) -> tuple[np.ndarray, ...]:
    """The read task: one program selects every position; the result is cut into the pieces. A
    chunk in device memory is read there and its pieces stay there (`DevicePiece`), for the
    blocks' tasks to join on a device (`joined`)."""
    if len(reader.bounds) < 2:
        return ()
    (data,) = reader.part.arrays(args)
    positions = reader.positions
    on_device = base.is_device_block(data)
    if reader.flat and on_device and hasattr(data, "reshape"):
        data = data.reshape((math.prod(data.shape),))  # C-contiguous: raveled as it lies
    elif reader.flat:
        data, positions = raveled(np.asarray(data), positions)
    chain, axis = reader.chain(), 0 if reader.flat else reader.axis
    inputs = _touched(runtime, chain, [data, positions], [(0, axis)])
    out = run_splitting(_runner(runtime, reader.block, resident=on_device), chain, inputs)
    if base.is_device_block(out):
        return tuple(DevicePiece(out, axis, lo, hi) for lo, hi in pairwise(reader.bounds))
    lead = (slice(None),) * axis
    return tuple(out[(*lead, slice(lo, hi))] for lo, hi in pairwise(reader.bounds))


def raveled(data: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`data` as a 1-d array and `positions` (row-major element numbers of `data`) into it.

    A C-contiguous chunk is raveled as it is. Raveling another view would copy it whole (a
    broadcast chunk: every repeated row), so it is read through its memory span instead, each
    position turned into the element's offset there: nothing is copied, and a broadcast's span
    is its base row. (A view whose span is no shorter than itself is raveled after all.)"""
    if data.flags.c_contiguous:
        return data.reshape(-1), positions
    lay = Layout.of(data)
    if lay.span >= data.size:
        return data.reshape(-1), positions
    coords = np.unravel_index(positions.astype(np.intp), data.shape)
    offsets = np.full(positions.shape, lay.offset, dtype=np.int64)
    for c, stride in zip(coords, lay.strides):
        offsets += c * stride
    # each offset is below the span's length, itself below the view's size: the positions' dtype holds it
    return layouts.memory_span(data).view(data.dtype), offsets.astype(positions.dtype)


@dataclass(frozen=True, eq=False)
class BlockRecipe:
    """How one output block is computed: inputs, the chain to plan (None: views only), post views,
    the block's number (row-major in its group), which picks its device (`device_for`), and
    `export`: whether a Vulkan program may leave the block on the device (`graph.crossing`)."""

    inputs: tuple[InputSpec, ...]
    chain: Chain | None
    post: tuple[ViewOp, ...]
    shape: tuple[int, ...]
    dtype: np.dtype
    block: int = 0
    export: bool = False

    def signature(self, metas: Sequence[ArgMeta]) -> tuple[list[DType], list[Layout]]:
        """Program input dtypes and layouts, assuming every argument chunk is contiguous."""
        sigs = [s for spec in self.inputs for s in spec.signature(metas)]
        return [d for d, _ in sigs], [lay for _, lay in sigs]


def _runner(runtime: Runtime, block: int, into: np.ndarray | None = None,
            handover: bool = False, resident: bool = False
            ) -> Callable[[Chain, list[np.ndarray]], np.ndarray]:
    """Plan a chain for its inputs and run it where its resident inputs lie, else on block
    `block`'s device (`home_device`, `device_for`); its one output, written
    into `into` where that has the output's shape and dtype (a split block's halves do not), or
    with `handover` left on the device where `crossing.hand_over` can, or with `resident` kept in
    the device's memory where its backend can (`base.BlockHolder`: `persist(device=True)`)."""
    def run(chain: Chain, inputs: list[np.ndarray]) -> np.ndarray:
        keep = resident and into is None
        placement = Placement.of([base.block_backend(a) for a in inputs],
                                 block_holder(block)[0] if keep else None)
        program = runtime.planner().plan(chain, input_dtypes(inputs), [Layout.of(a) for a in inputs],
                                         placement)
        device = home_device(inputs, program.backend)
        if device is None:
            device = device_for(block, program.backend)
        if keep:
            holder = base.holder(program.backend, device)
            if not isinstance(holder, str):
                return holder.run_resident(program, inputs)
        if handover and crossing.exports(program.backend):
            return crossing.hand_over(program, inputs, device)
        execute = executor(program.backend, device).run
        shape, dtype = program.value_meta(program.outputs[0])
        if into is not None and into.shape == shape and into.dtype == dtype.numpy:
            (out,) = execute(program, inputs, out=[into])
        else:
            (out,) = execute(program, inputs)
        return out
    return _under_config(runtime, run)


def _under_config(runtime: Runtime, run: Callable[[Chain, list[np.ndarray]], np.ndarray]
                  ) -> Callable[[Chain, list[np.ndarray]], np.ndarray]:
    """`run` under the `lazyfuel.config` values the graph was lowered with (on any thread or worker)."""
    def applied(chain: Chain, inputs: list[np.ndarray]) -> np.ndarray:
        with runtime.applied():
            return run(chain, inputs)
    return applied


def input_dtypes(inputs: Sequence[np.ndarray]) -> list[DType]:
    """The program's input dtypes: each array's. Index inputs come in the kernels' index dtype
    already (`graph.indices.kernel_dtype`: U32, or I64 on an axis past 2**32)."""
    return [DType.from_numpy(a.dtype) for a in inputs]


def _touched(runtime: Runtime, chain: Chain, inputs: list[Any], sources: Sequence[tuple[int, int]]
             ) -> list[Any]:
    """`inputs` with each select source in `sources` staged as the rows its indices touch where
    the planner prices that cheaper than reading it as it is (`graph.touched`)."""
    if not sources:
        return inputs
    with runtime.applied():
        planner = runtime.planner()
        for source, axis in sources:
            inputs = staged_where_cheaper(planner, chain, inputs, source, axis)
    return inputs


def _streamed(runtime: Runtime, recipe: BlockRecipe, inputs: list[Any]) -> Any | None:
    """A block kept in device memory whose rows the host gathers straight into it, piece by piece
    as earlier pieces upload, where the planner prices that cheapest (`touched.streamed_where_cheaper`;
    the block's device's `base.RowStreamer`); else None (plan and run the chain). Either way the
    rows are written into the block's part of the compute's result where one is placed
    (`graph/placed.py`)."""
    assert recipe.chain is not None
    with runtime.applied():
        planner = runtime.planner()
        try:
            backend, holder = block_holder(recipe.block)
        except RuntimeError:  # nothing keeps blocks here: `_runner` says so
            return None
        if not isinstance(holder, base.RowStreamer):
            return None
        return streamed_where_cheaper(planner, recipe.chain, inputs, backend, holder, part_for(recipe))


def run_block(recipe: BlockRecipe, runtime: Runtime, *args: Any) -> np.ndarray:
    """The task: build the program inputs from `args`, plan, run once, view the result (its
    Python in a turn of `prep_gate`)."""
    with prep_gate.turn(prep_slots(runtime)):
        return computed_block(recipe, runtime, args, None)


def store_block(recipe: BlockRecipe, runtime: Runtime, dest: np.ndarray, region: tuple[slice, ...],
                *args: Any) -> None:
    """The task of a compute into one array: the block is computed into `dest[region]`, by the
    kernels themselves (`Executor.run(out=)`) where that region is contiguous and no numpy view
    follows the program, else copied there (its Python in a turn of `prep_gate`). Returns
    nothing: the result is in `dest`."""
    target = dest[region] if dest.ndim else dest  # a 0-d array indexed by () is a scalar
    direct = recipe.chain is not None and not recipe.post and target.flags.c_contiguous
    with prep_gate.turn(prep_slots(runtime)):
        result = computed_block(recipe, runtime, args, target if direct else None)
    if result is not target:
        target[...] = result


def prep_slots(runtime: Runtime) -> int:
    """`config.prep_slots` as the graph was lowered under (its `lazyfuel.config` blocks), without
    applying them: a task's turn is taken before its runtime is applied."""
    for name, value in getattr(runtime, "overrides", ()):
        if name == "prep_slots":
            return value
    return config.prep_slots


def store_made(made: Callable[[], tuple[BlockRecipe, list[Any]]], runtime: Runtime, dest: np.ndarray,
               region: tuple[slice, ...]) -> None:
    """`store_block` of the recipe and arguments `made()` returns: a task that makes its own
    recipe when it runs (its chunks are held in the graph, so it has nothing to wait for)."""
    with prep_gate.turn(prep_slots(runtime)):
        recipe, args = made()
        store_block(recipe, runtime, dest, region, *args)


def computed_block(recipe: BlockRecipe, runtime: Runtime, args: Sequence[Any],
              into: np.ndarray | None) -> np.ndarray:
    """The block (written into `into` when given: then `into` is returned)."""
    if math.prod(recipe.shape) == 0:
        return np.empty(recipe.shape, recipe.dtype)
    inputs, sources, resident = block_inputs(recipe, runtime, args)
    if recipe.chain is None:  # views only: a view of a device block comes back as numpy
        out = np.asarray(inputs[0]) if getattr(recipe.inputs[0], "views", ()) else inputs[0]
    else:
        handover = recipe.export and not recipe.post
        out = _streamed(runtime, recipe, inputs) if resident and into is None else None
        if out is None:
            inputs = _touched(runtime, recipe.chain, inputs, sources)
            out = run_splitting(_runner(runtime, recipe.block, into, handover, resident), recipe.chain,
                                inputs)
    return finished(recipe, out)


def block_inputs(recipe: BlockRecipe, runtime: Runtime, args: Sequence[Any]
                 ) -> tuple[list[Any], list[tuple[int, int]], bool]:
    """The program inputs of `recipe` made from the task's `args`; the (program input, axis) of
    each select's source read from chunks in hand; whether the result is kept on the device
    (`config._resident`, and no numpy view follows but reshapes)."""
    with runtime.applied():
        # views of a kept block are downloaded, but a gather's reshape sees it as it lies
        resident = config._resident and all(op == "reshape" for op, _ in recipe.post)
        kept = config.kept_indices
    inputs: list[Any] = []
    sources = []
    with kept_indices.keeping(getattr(runtime, "backend", "auto"), resident, kept):
        for spec in recipe.inputs:
            if isinstance(spec, Gathered):
                sources.append((len(inputs), spec.axis))
            inputs.extend(spec.arrays(args))
    return inputs, sources, resident


def finished(recipe: BlockRecipe, out: Any) -> Any:
    """The program's result `out` with the recipe's numpy views applied, its shape checked."""
    out = apply_views(out, recipe.post)
    if out.shape != recipe.shape:
        raise RuntimeError(f"lazyfuel produced a block of shape {out.shape}, expected {recipe.shape}; "
                           f"this is a bug in the graph layer")
    return out
