"""Inputs and one-binding Programs that the judge times and the audit checks.

`make_inputs(binding, shape, dim, rng)` draws fresh inputs for a binding's op kind (its spec's
`make_inputs`, `lazyfuel.ops`): random bits with NaN payloads (quiet and signalling), -0.0,
subnormals, infinities and the largest finite values sprinkled into float data
(`lazyfuel.ops.data`), in-range U32 indices, bool masks, and the attributes of the op (`dim`, the
fill `value`). FFT inputs are finite (an FFT mixes every element of a row, so one NaN or infinity
spoils the whole row). `program_for(binding, inputs, attrs, steps)` builds the Program that runs
the binding `steps` times in a row (each step reads the previous result, or the inputs again with
`reread`), with the same op params the planner computes, so a timed or audited program is what a
plan would run. `ladder_workloads(binding, n, rng)` are the judge's workloads of about `n`
elements (one per view timed), built by the op kind's spec (`OpSpec.ladder`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lazyfuel.contracts.model import OpKind
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.ops import find, spec_for, specs
from lazyfuel.ops.contiguize import ContiguizeParams
from lazyfuel.ops.data import SPECIAL_FRACTION, random_array, special_bits
from lazyfuel.planner.plan import cost_env
from lazyfuel.planner.program import Program, Step
from lazyfuel.registry.model import Binding

__all__ = ["SPECIAL_FRACTION", "Workload", "ladder_workload", "ladder_workloads", "make_inputs",
           "program_for", "random_array", "special_bits", "supported"]


def supported(binding: Binding) -> bool:
    """Whether the judge and the audit know how to build inputs and workloads for `binding`'s op kind
    (it has an op spec)."""
    return find(binding.op_kind) is not None


def make_inputs(binding: Binding, shape: Sequence[int], dim: int, rng: np.random.Generator,
                n_indices: int | None = None,
                attrs: Mapping[str, Any] | None = None) -> tuple[list[np.ndarray], dict[str, Any]]:
    """Fresh inputs (contiguous) and op attributes for `binding` on data of `shape`.

    `dim` is the selected or transformed axis; `n_indices` the length of the index axis (default:
    `shape[dim]`). For the FFT kinds `shape[dim]` is the signal length (irfft reads
    `shape[dim] // 2 + 1` points of it). `attrs` (e.g. an FFT's `norm` and `n`) are added to the
    attributes the op kind's maker chose, replacing its own. Raises KeyError naming the op kinds
    known if `binding`'s is not.
    """
    shape = tuple(int(s) for s in shape)
    spec = _spec(binding, "workload")
    count = shape[dim] if n_indices is None and shape else (n_indices or 1)
    inputs, made = spec.make_inputs(binding.dtypes, shape, dim, count, rng)
    return inputs, {**made, **(attrs or {})}


def _spec(binding: Binding, what: str) -> Any:
    """The spec of `binding`'s op kind; KeyError naming the op kinds known if it has none."""
    try:
        return spec_for(binding.op_kind)
    except KeyError:
        known = " ".join(s.kind.name for s in specs())
        raise KeyError(f"no {what} for op kind {binding.op_kind}; known: {known}") from None


@dataclass(frozen=True)
class Workload:
    """A Program running one binding, its inputs, and the bytes one step moves by its contract."""

    program: Program
    inputs: tuple[np.ndarray, ...]
    bytes_moved: float
    n: int


def _step(binding: Binding, args: tuple[int, ...], layouts: Sequence[Layout],
          attrs: dict[str, Any]) -> Step:
    """One step of `binding` over values whose layouts (relative to their storage) are `layouts`."""
    if binding.op_kind is OpKind.Contiguize:
        params, out_shape = ContiguizeParams.of_layout(layouts[0]), layouts[0].shape
    else:
        params, out_shape = spec_for(binding.op_kind).params([lay.shape for lay in layouts],
                                                             binding.dtypes[0], attrs)
    return Step(binding, args, tuple(params.items()), tuple(out_shape), binding.dtypes[-1])


def program_for(binding: Binding, inputs: Sequence[np.ndarray], attrs: dict[str, Any],
                steps: int = 1, reread: bool = False, view: Layout | None = None) -> Workload:
    """Run `binding` `steps` times: step 0 on `inputs`, each later step on the previous result.

    Later steps read the previous output in place of input 0 (the other inputs stay), so the op
    must keep its first input's shape and dtype for `steps > 1` (index_select with as many indices
    as rows, gather with same-shape indices, masked_fill, contiguize). With `reread` every step
    reads `inputs` again instead (an op whose output cannot feed it, e.g. rfft); the program
    returns the last step's result. `view` (Contiguize): the view of input 0's memory span that
    step 0 copies, as a plan's step copies a view the chain takes of an input (e.g. a start
    offset, which `Layout.of` of an array never has); default: the whole input.
    """
    arrays = tuple(np.asarray(a) for a in inputs)
    layouts = [Layout.of(a) for a in arrays]
    dtypes = tuple(DType.from_numpy(a.dtype) for a in arrays)
    n_in = len(arrays)
    first = _step(binding, tuple(range(n_in)), [view or layouts[0], *layouts[1:]], attrs)
    chain = [first]
    for i in range(1, steps):
        if reread:
            chain.append(first)
            continue
        prev = Layout.contiguous(chain[-1].out_shape)
        chain.append(_step(binding, (n_in + i - 1, *range(1, n_in)), [prev, *layouts[1:]], attrs))
    program = Program(dtypes, tuple(layouts), tuple(chain), (n_in + steps - 1,))
    env = cost_env(binding, first.param, first.out_shape)
    return Workload(program, arrays, binding.contract.cost.bytes_moved.evaluate(env),
                    math.prod(first.out_shape))


def ladder_workloads(binding: Binding, n: int, rng: np.random.Generator,
                     steps: int = 1) -> tuple[Workload, ...]:
    """The judge's workloads of about `n` elements for `binding`, built by its op kind's spec
    (`OpSpec.ladder`): one for most op kinds; for Contiguize, one per view it is timed on (the
    judge keeps the slowest). `steps` > 1 runs the binding that many times in one program (the
    per-dispatch cost). Raises KeyError naming the op kinds known if `binding`'s has no spec."""
    timed = _spec(binding, "judge workload").ladder(binding.contract, binding.dtypes, n, rng)
    return tuple(program_for(binding, t.inputs, t.attrs, steps, reread=t.reread, view=t.view)
                 for t in timed)


def ladder_workload(binding: Binding, n: int, rng: np.random.Generator, steps: int = 1) -> Workload:
    """The first of `ladder_workloads` (for Contiguize: the dense view at a start offset)."""
    return ladder_workloads(binding, n, rng, steps)[0]
