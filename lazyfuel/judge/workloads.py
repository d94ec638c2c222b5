"""Inputs and one-binding Programs that the judge times and the audit checks.

`make_inputs(binding, shape, dim, rng)` draws fresh inputs for a binding's op kind (a table, one
row per op kind): random bits with NaN payloads (quiet and signalling), -0.0, subnormals, infinities
and the largest finite values sprinkled into float data, in-range U32 indices, bool masks, and the
attributes of the op (`dim`, the fill `value`). FFT inputs are finite (an FFT mixes every element
of a row, so one NaN or infinity spoils the whole row). `program_for(binding, inputs, attrs, steps)`
builds the Program that runs the binding `steps` times in a row (each step reads the previous
result, or the inputs again with `reread`), with the same op params the planner computes, so a
timed or audited program is what a plan would run. `ladder_workloads(binding, n, rng)` are the
judge's workloads of about `n` elements (one per view timed), built by the op kind's row of `LADDERS`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lazyfuel.contracts.model import OpKind
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.planner.plan import FFT_LENGTHS, PARAMS, cost_env
from lazyfuel.planner.program import Program, Step
from lazyfuel.registry.model import Binding

# (exponent bits, mantissa bits) of each float format, by the numpy kind of its component.
_FORMATS = {"float16": (5, 10), "bfloat16": (8, 7), "float32": (8, 23), "float64": (11, 52)}
_COMPONENT = {DType.C64: DType.F32, DType.C128: DType.F64}
SPECIAL_FRACTION = 0.05


def special_bits(exp_bits: int, man_bits: int, rng: np.random.Generator) -> list[int]:
    """Bit patterns arithmetic would change or lose: NaN payloads, -0.0, subnormals, ±inf, ±max."""
    sign, exp = 1 << (exp_bits + man_bits), ((1 << exp_bits) - 1) << man_bits
    quiet = 1 << (man_bits - 1)
    payload = int(rng.integers(1, quiet)) if quiet > 1 else 0
    return [exp | quiet | payload, sign | exp | quiet | payload, exp | max(payload, 1),  # qNaN, -qNaN, sNaN
            sign, 1, sign | 1, (1 << man_bits) - 1,  # -0.0, ±smallest subnormal, largest subnormal
            exp, sign | exp, exp - 1, sign | (exp - 1)]  # ±inf, ±largest finite


def random_array(rng: np.random.Generator, dtype: DType, shape: Sequence[int],
                 specials: bool = True) -> np.ndarray:
    """Fresh data of `dtype`: varied floats (specials sprinkled in), random integer bits, 0/1 bools."""
    shape = tuple(int(s) for s in shape)
    n = math.prod(shape)
    if dtype is DType.BOOL:
        return rng.integers(0, 2, shape).astype(np.bool_)
    component = _COMPONENT.get(dtype, dtype)
    fmt = _FORMATS.get(component.numpy.name)
    count = n * (2 if dtype in _COMPONENT else 1)
    if fmt is None:  # integers: every bit pattern is a value
        return rng.integers(0, 256, n * dtype.itemsize, dtype=np.uint8).view(dtype.numpy).reshape(shape)
    reach = min(20, (1 << (fmt[0] - 1)) // 3)  # stay finite: infinities come from the specials
    values = rng.standard_normal(count) * np.exp2(rng.integers(-reach, reach, count))
    words = values.astype(component.numpy).view(f"u{component.itemsize}")
    if specials and count:
        pool = np.array(special_bits(*fmt, rng), dtype=words.dtype)
        picks = rng.random(count) < SPECIAL_FRACTION
        picks[rng.integers(0, count)] = True  # at least one, even in a tiny array
        words[picks] = rng.choice(pool, int(picks.sum()))
    return words.view(dtype.numpy).reshape(shape)


def _fill_value(data: np.ndarray, rng: np.random.Generator) -> Any:
    """A fill value already of the data's dtype (its exact bits are kept, NaN payloads included)."""
    flat = data.reshape(-1)
    return flat[int(rng.integers(0, flat.size))] if flat.size else data.dtype.type(0)


def _index_select(binding: Binding, shape: tuple[int, ...], dim: int, n_indices: int,
                  rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    src = random_array(rng, binding.dtypes[0], shape)
    index = binding.dtypes[1].numpy  # U32, or I64 (the Cpu kernels for axes past 2**32)
    idx = rng.integers(0, shape[dim], n_indices).astype(index) if shape[dim] else np.zeros(0, index)
    return [src, idx], {"dim": dim}


def _gather(binding: Binding, shape: tuple[int, ...], dim: int, n_indices: int,
            rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    src = random_array(rng, binding.dtypes[0], shape)
    idx_shape = (*shape[:dim], n_indices, *shape[dim + 1:])
    idx = rng.integers(0, max(shape[dim], 1), idx_shape).astype(binding.dtypes[1].numpy)
    return [src, idx], {"dim": dim}


def _masked_fill(binding: Binding, shape: tuple[int, ...], dim: int, n_indices: int,
                 rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    data = random_array(rng, binding.dtypes[0], shape)
    mask = rng.random(shape) < 0.5
    return [data, mask], {"value": _fill_value(data, rng)}


def _select_fill(binding: Binding, shape: tuple[int, ...], dim: int, n_indices: int,
                 rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    """index_select's inputs, and masked_fill's mask (of the selection's shape) and fill value."""
    (src, idx), attrs = _index_select(binding, shape, dim, n_indices, rng)
    mask = rng.random((*shape[:dim], n_indices, *shape[dim + 1:])) < 0.5
    return [src, idx, mask], {**attrs, "value": _fill_value(src, rng)}


def _contiguize(binding: Binding, shape: tuple[int, ...], dim: int, n_indices: int,
                rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    return [random_array(rng, binding.dtypes[0], shape)], {}


# The input points along the transformed axis for a signal of `length` points (numpy's `n`):
# irfft reads the length // 2 + 1 non-negative frequencies of it.
FFT_POINTS_IN: dict[OpKind, Callable[[int], int]] = {
    OpKind.Fft: lambda length: length,
    OpKind.Ifft: lambda length: length,
    OpKind.Rfft: lambda length: length,
    OpKind.Irfft: lambda length: length // 2 + 1,
}


def _fft(binding: Binding, shape: tuple[int, ...], dim: int, n_indices: int,
         rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    """Finite data for a transform of `shape[dim]` points along `dim`: the input axis holds the points
    the op kind reads for that signal length, and `n` is given where numpy's default would differ
    (an odd-length irfft)."""
    length = shape[dim]
    points = FFT_POINTS_IN[binding.op_kind](length)
    data = random_array(rng, binding.dtypes[0], (*shape[:dim], points, *shape[dim + 1:]), specials=False)
    attrs: dict[str, Any] = {"axis": dim}
    if FFT_LENGTHS[binding.op_kind][0](points) != length:
        attrs["n"] = length
    return [data], attrs


InputMaker = Callable[[Binding, tuple[int, ...], int, int, np.random.Generator],
                      tuple[list[np.ndarray], dict[str, Any]]]
INPUTS: dict[OpKind, InputMaker] = {
    OpKind.IndexSelect: _index_select,
    OpKind.Gather: _gather,
    OpKind.MaskedFill: _masked_fill,
    OpKind.Contiguize: _contiguize,
    OpKind.SelectFill: _select_fill,
    **{kind: _fft for kind in FFT_POINTS_IN},
}


def supported(binding: Binding) -> bool:
    """Whether the judge and the audit know how to build inputs and workloads for `binding`'s op kind."""
    return binding.op_kind in INPUTS and binding.op_kind in LADDERS


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
    maker = INPUTS.get(binding.op_kind)
    if maker is None:
        known = " ".join(k.name for k in INPUTS)
        raise KeyError(f"no workload for op kind {binding.op_kind}; known: {known}")
    count = shape[dim] if n_indices is None and shape else (n_indices or 1)
    inputs, made = maker(binding, shape, dim, count, rng)
    return inputs, {**made, **(attrs or {})}


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
        lay = layouts[0]
        params = {"shape": lay.shape, "strides": lay.strides, "offset": lay.offset}
        out_shape = lay.shape
    else:
        params, out_shape = PARAMS[binding.op_kind]([lay.shape for lay in layouts], binding.dtypes[0],
                                                     attrs)
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


STRIDED_READ = "strided_read"  # the cost class of kernels that read a view of their source directly


def _select_ladder(binding: Binding, n: int, rng: np.random.Generator,
                   steps: int = 1) -> tuple[Workload, ...]:
    """About `n` output elements in rows of 64 elements.

    IndexSelect picks as many rows as the source has (dim 0), Gather picks along the rows (dim 1),
    MaskedFill fills half, SelectFill does both (its rows of 64 elements are whole 16-byte words).
    A kernel of cost class `strided_read` reads a transposed source: the
    planner weighs it against Contiguize + a contiguous kernel for such chunks, so that is the cost
    to measure. Contiguize: see `_contiguize_ladder`.
    """
    cols = min(n, 64)
    rows = max(n // cols, 1)
    dim = 1 if binding.op_kind is OpKind.Gather else 0
    inputs, attrs = make_inputs(binding, (rows, cols), dim, rng)
    if binding.contract.cost.cls == STRIDED_READ:
        inputs[0] = np.ascontiguousarray(inputs[0].T).T  # the same values, stored transposed
    return (program_for(binding, inputs, attrs, steps),)


def _contiguize_ladder(binding: Binding, n: int, rng: np.random.Generator,
                       steps: int = 1) -> tuple[Workload, ...]:
    """The views a Contiguize binding is timed on, about `n` elements in rows of 64 (docs/decisions.md).

    First a dense view at a start offset (rows 1.. of an array one row taller): every Contiguize
    binding accepts it, so the buffer copy and the copy shader are compared on the same view at
    each rung, which is where the planner chooses between them. Then, where the binding's caps
    accept one, a transposed view (what the planner inserts Contiguize for ahead of a contiguous
    kernel): the judge keeps the slower of the two at each rung, so a binding that reads strided
    views is never priced below what a strided view costs it.
    """
    cols = min(n, 64)
    rows = max(n // cols, 1)
    (base,), attrs = make_inputs(binding, (rows + 1, cols), 0, rng)
    dense = Layout((rows, cols), (cols, 1), cols)  # base[1:], located in base's buffer
    timed = [program_for(binding, [base], attrs, steps, view=dense)]
    (stored,), _ = make_inputs(binding, (cols, rows), 0, rng)
    if binding.contract.inputs[0].layout.violation(Layout.of(stored.T)) is None:
        timed.append(program_for(binding, [stored.T], attrs, steps))
    return tuple(timed)
FFT_LADDER_LENGTH = 4096


def _fft_ladder(binding: Binding, n: int, rng: np.random.Generator,
                steps: int = 1) -> tuple[Workload, ...]:
    """Rows of `min(n, FFT_LADDER_LENGTH)`-point signals, about `n` points in all, transformed along
    the last axis (as a chunk whose other axes are chunked); `steps` transforms each read the input
    again (rfft and irfft change the dtype, so their output cannot feed them)."""
    length = min(max(n, 2), FFT_LADDER_LENGTH)
    inputs, attrs = make_inputs(binding, (max(n // length, 1), length), 1, rng)
    return (program_for(binding, inputs, attrs, steps, reread=True),)


Ladder = Callable[[Binding, int, np.random.Generator, int], tuple[Workload, ...]]
LADDERS: dict[OpKind, Ladder] = {
    OpKind.IndexSelect: _select_ladder,
    OpKind.Gather: _select_ladder,
    OpKind.MaskedFill: _select_ladder,
    OpKind.SelectFill: _select_ladder,
    OpKind.Contiguize: _contiguize_ladder,
    **{kind: _fft_ladder for kind in FFT_POINTS_IN},
}


def ladder_workloads(binding: Binding, n: int, rng: np.random.Generator,
                     steps: int = 1) -> tuple[Workload, ...]:
    """The judge's workloads of about `n` elements for `binding`, built by its op kind's row of
    `LADDERS`: one for most op kinds; for Contiguize, one per view it is timed on (the judge keeps
    the slowest). `steps` > 1 runs the binding that many times in one program (the per-dispatch
    cost). Raises KeyError naming the op kinds known if `binding`'s has no ladder."""
    ladder = LADDERS.get(binding.op_kind)
    if ladder is None:
        known = " ".join(k.name for k in LADDERS)
        raise KeyError(f"no judge workload for op kind {binding.op_kind}; known: {known}")
    return ladder(binding, n, rng, steps)


def ladder_workload(binding: Binding, n: int, rng: np.random.Generator, steps: int = 1) -> Workload:
    """The first of `ladder_workloads` (for Contiguize: the dense view at a start offset)."""
    return ladder_workloads(binding, n, rng, steps)[0]
