"""Running a chain in halves when the device is out of memory for the whole block.

`run_splitting(run, chain, inputs)` calls `run(chain, inputs)` (plan and run one program); when
that raises MemoryError (the Vulkan allocator's VulkanMemoryError is one) it runs the same chain
on the two halves of the output along its leading axis, recursively, and concatenates them.
Selects, masked_fill, Contiguize and views compute each output element from its own inputs, so
the halves give the whole block's bits exactly.

`halves(chain, inputs)` finds which program inputs follow the output's leading axis: walking the
chain back from its output, each value is either cut along one of its axes (the same rows as
the output) or needed whole (a select's source along the selected axis). Rules per op, in each
op's spec (`OpSpec.cut` and `OpSpec.shape`, `lazyfuel.ops`) and view's (`lazyfuel.ops.views`):
MaskedFill cuts data and mask alike; IndexSelect / Gather along another axis cut the source (and
a gather's indices) on that axis, along the cut axis they cut the indices and need the source
whole; Contiguize and transpose pass the cut on (transpose to its source axis); getitem where
that axis is taken whole; broadcast_to where the axis is the source's own (a broadcast axis
needs the source whole, and the node's shape is cut). FFT nodes and anything else are not split.
Program inputs are cut as numpy views (no copy). A chain that cannot be cut, or
an output of one row along the leading axis (the floor), turns the MemoryError into one that also
names the block and why it could not be split further.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from lazyfuel.ops import find
from lazyfuel.ops.spec import CutRule, OpSpec
from lazyfuel.ops.views import VIEWS, ViewSpec
from lazyfuel.planner.chain import Chain

Run = Callable[[Chain, list[np.ndarray]], np.ndarray]
Cut = int | None  # the axis a value is cut along (the output's leading rows), or None: whole
Half = tuple[Chain, list[np.ndarray]]


def run_splitting(run: Run, chain: Chain, inputs: list[np.ndarray],
                  whole: tuple[int, ...] | None = None) -> np.ndarray:
    """`run(chain, inputs)`; on MemoryError the same in halves along the output's leading axis
    (recursively, down to one row). MemoryError naming the block when it cannot be split
    (`whole`: the shape of the block this is a piece of)."""
    try:
        return run(chain, inputs)
    except MemoryError as err:
        pair, why = halves(chain, inputs)
        if pair is None:
            shape = _out_shape(chain, inputs)
            block = (f"a block of shape {shape}" if whole is None else
                     f"a block of shape {whole}, split along axis 0 down to pieces of shape {shape}")
            raise MemoryError(f"{err} (computing {block}, which {why})") from err
    whole = _out_shape(chain, inputs) if whole is None else whole
    return np.concatenate([run_splitting(run, *half, whole) for half in pair], axis=0)


def _out_shape(chain: Chain, inputs: Sequence[np.ndarray]) -> Any:
    return _shapes(chain, [a.shape for a in inputs])[chain.outputs[0]]


def halves(chain: Chain, inputs: Sequence[np.ndarray]) -> tuple[tuple[Half, Half] | None, str]:
    """The chain and inputs for the two halves of its output's leading axis, or None and why not."""
    if len(chain.outputs) != 1:
        return None, "has several outputs"
    shapes = _shapes(chain, [a.shape for a in inputs])
    out = chain.outputs[0]
    if shapes[out] is None:
        return None, "has an op that is not split (an FFT)"
    if len(shapes[out]) == 0 or shapes[out][0] < 2:
        return None, "is one row along its leading axis (as far as splitting goes)"
    cuts = _cuts(chain, shapes)
    if isinstance(cuts, str):
        return None, cuts
    rows = shapes[out][0]
    middle = rows // 2
    return (_half(chain, inputs, shapes, cuts, 0, middle),
            _half(chain, inputs, shapes, cuts, middle, rows)), ""


def _half(chain: Chain, inputs: Sequence[np.ndarray], shapes: list[Any], cuts: dict[int, Cut],
          lo: int, hi: int) -> Half:
    arrays = []
    for i, a in enumerate(inputs):
        axis = cuts.get(i)
        arrays.append(a if axis is None else a[(slice(None),) * axis + (slice(lo, hi),)])
    nodes = []
    for k, node in enumerate(chain.nodes):
        axis = cuts.get(chain.n_inputs + k)
        if node.op == "broadcast_to" and axis is not None:  # its shape attr is the output's: cut it
            shape = list(node.attr["shape"])
            shape[axis] = hi - lo
            node = replace(node, attrs=tuple((n, tuple(shape) if n == "shape" else v) for n, v in node.attrs))
        nodes.append(node)
    return replace(chain, nodes=tuple(nodes)), arrays


def _cuts(chain: Chain, shapes: list[Any]) -> dict[int, Cut] | str:
    """The axis each value is cut along (None: whole), from the output back; else why not."""
    cuts: dict[int, Cut] = {chain.outputs[0]: 0}
    for k in range(len(chain.nodes) - 1, -1, -1):
        value = chain.n_inputs + k
        if value not in cuts:
            continue  # not read on the way to the output
        node = chain.nodes[k]
        axis = cuts[value]
        args = ([None] * len(node.args) if axis is None
                else _cut_rule(node.op)(node.attr, axis, [shapes[a] for a in node.args]))
        if args is None:
            return f"has a {node.op} that does not keep the rows it is cut along"
        for arg, cut in zip(node.args, args):
            if cuts.setdefault(arg, cut) != cut:
                return "reads one value both whole and cut"
    return cuts


def _never(attr: Mapping[str, Any], axis: int, shapes: list[Any]) -> None:
    return None


def _rules(op: str) -> OpSpec | ViewSpec | None:
    """The halving rules (`cut`, `shape`) of the node `op`: its op spec's or view's (None: neither)."""
    return find(op) or VIEWS.get(op)


def _cut_rule(op: str) -> CutRule:
    """How the node `op` is cut; `_never` if it is not."""
    rules = _rules(op)
    return (rules.cut if rules is not None else None) or _never


def _shapes(chain: Chain, input_shapes: list[tuple[int, ...]]) -> list[Any]:
    """The shape of every value of the chain (None from a node with no shape rule on)."""
    shapes: list[Any] = list(input_shapes)
    for node in chain.nodes:
        args = [shapes[a] for a in node.args]
        rules = _rules(node.op)
        rule = rules.shape if rules is not None else None
        shapes.append(None if rule is None or any(s is None for s in args) else rule(node.attr, args))
    return shapes
