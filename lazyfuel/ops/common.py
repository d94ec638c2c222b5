"""What several op specs share: the select family's audit cases and judge ladder, the audit's
comparisons and the ways it splits a case into pieces for the bitwise-determinism check (by
indices, by rows, or along an axis the op leaves alone)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from lazyfuel.contracts.model import KernelContract
from lazyfuel.dtypes import DType
from lazyfuel.layout import normalize_dim
from lazyfuel.ops.spec import Attrs, Case, Chunking, InputMaker, Inputs, Ladder, OpSpec, Timed
from lazyfuel.precision import Mismatch, first_mismatch, worst_row_mismatch

# The select family's audit cases (ranks 1-3, odd extents, every dim), and the views run where a
# binding's caps accept them.
SELECT_CASES = (Case((97,), 0, 41), Case((37, 13), 0, 50), Case((37, 13), 1, 7), Case((5, 6, 7), 1, 9),
                Case((5, 6, 7), 2, 3), Case((3, 4, 5), 0, 1), Case((64, 33), 1, 64), Case((1,), 0, 3))
SELECT_VIEW_CASES = (Case((12, 9), 1, 5, "transposed"), Case((11, 7), 0, 6, "reversed"),
                     Case((10, 6), 0, 4, "offset-strided"), Case((8, 5), 1, 3, "broadcast"))

STRIDED_READ = "strided_read"  # the cost class of kernels that read a view of their source directly


def rows_of(n: int) -> tuple[int, int]:
    """About `n` elements as (rows, columns) in rows of at most 64 elements."""
    cols = min(n, 64)
    return max(n // cols, 1), cols


def select_ladder(make_inputs: InputMaker, dim: int) -> Ladder:
    """The judge's workload of a select-family op: about `n` output elements in rows of 64 along
    `dim` (IndexSelect picks as many rows as the source has along dim 0, Gather picks along the
    rows, MaskedFill fills half). A kernel of cost class `strided_read` reads a transposed source:
    the planner weighs it against Contiguize + a contiguous kernel for such chunks, so that is the
    cost to measure."""

    def ladder(contract: KernelContract, dtypes: tuple[DType, ...], n: int,
               rng: np.random.Generator) -> tuple[Timed, ...]:
        shape = rows_of(n)
        inputs, attrs = make_inputs(dtypes, shape, dim, shape[dim], rng)
        if contract.cost.cls == STRIDED_READ:
            inputs[0] = np.ascontiguousarray(inputs[0].T).T  # the same values, stored transposed
        return (Timed(inputs, attrs),)

    return ladder


def data_mover(make_inputs: InputMaker, ladder_dim: int | None = None, **fields: Any) -> OpSpec:
    """The spec of a data mover: compared bit for bit, on the select family's audit cases unless
    `fields` give `cases` / `view_cases`, timed by `select_ladder(make_inputs, ladder_dim)` unless
    they give a `ladder`; `fields` are the rest of the `OpSpec`'s."""
    defaults = {"ladder": select_ladder(make_inputs, ladder_dim or 0), "cases": SELECT_CASES,
                "view_cases": SELECT_VIEW_CASES, "compare": elementwise}
    return OpSpec(make_inputs=make_inputs, **{**defaults, **fields})


def elementwise(got: np.ndarray, want: np.ndarray, dtype: DType, contract: KernelContract,
                attrs: Attrs) -> Mismatch | None:
    """Element by element, within the contract's `max_ulp` / `max_relative` / `max_absolute`."""
    return first_mismatch(got, want, dtype, contract.precision)


def per_row(got: np.ndarray, want: np.ndarray, dtype: DType, contract: KernelContract,
            attrs: Attrs) -> Mismatch | None:
    """Normwise per transformed row: `max|got - want| <= max_relative * max|want|` along the axis."""
    axis = normalize_dim(attrs.get("axis", -1), want.ndim)
    return worst_row_mismatch(got, want, axis, contract.precision)


def split(n: int, pieces: int) -> list[slice]:
    """`range(n)` cut into at most `pieces` non-empty slices."""
    bounds = np.linspace(0, n, min(pieces, max(n, 1)) + 1).astype(int)
    return [slice(int(a), int(b)) for a, b in itertools.pairwise(bounds) if b > a]


def by_rows(inputs: Inputs, attrs: Attrs, pieces: int) -> tuple[list[tuple[Inputs, Attrs]], int]:
    """Fewer rows (axis 0) of every input per piece; the results join along axis 0."""
    rows = inputs[0].shape[0]
    parts = [([a[s] if a.ndim else a for a in inputs], attrs) for s in split(rows, pieces)]
    return parts, 0


def by_indices(inputs: Inputs, attrs: Attrs, pieces: int) -> tuple[list[tuple[Inputs, Attrs]], int]:
    """Fewer indices per piece (and the inputs after them, a select_fill's mask, the same part of
    `dim`); the results join along `dim`."""
    dim, idx = attrs["dim"], inputs[1]
    axis = 0 if idx.ndim == 1 else dim

    def part(a: np.ndarray, along: int, s: slice) -> np.ndarray:
        return np.ascontiguousarray(np.take(a, range(s.start, s.stop), axis=along))

    parts = [([inputs[0], part(idx, axis, s), *(part(m, dim, s) for m in inputs[2:])], attrs)
             for s in split(idx.shape[axis], pieces)]
    return parts, dim


def by_other_axis(attr: str, default: int | None = None, contiguous: bool = False) -> Chunking:
    """A chunking that splits along the first axis other than the op's own (the attribute `attr`,
    `default` when absent: an FFT's `axis`, a flip's `dim`); a 1-d input is one piece; the results
    join along that axis. `contiguous`: each piece a contiguous copy (for kernels that read only
    contiguous sources), else a view."""

    def chunking(inputs: Inputs, attrs: Attrs, pieces: int) -> tuple[list[tuple[Inputs, Attrs]], int]:
        x = inputs[0]
        own = normalize_dim(attrs.get(attr, default), x.ndim)
        other = next((i for i in range(x.ndim) if i != own), None)
        if other is None:
            return [(inputs, attrs)], 0
        parts = [x[(slice(None),) * other + (s,)] for s in split(x.shape[other], pieces)]
        return [([np.ascontiguousarray(p) if contiguous else p], attrs) for p in parts], other

    return chunking
