"""Gather (`lf.gather(x, dim, indices)`): elements of `x` picked along `dim` by an index array of
`x`'s rank; the output has the indices' shape (`GatherParams`: both shapes and the dim)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lazyfuel import checks
from lazyfuel.contracts.model import DtypeRule, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.ops import bits
from lazyfuel.ops.common import by_indices, data_mover
from lazyfuel.ops.data import random_array
from lazyfuel.ops.index_select import INDICES_U32
from lazyfuel.ops.push import PushLayout
from lazyfuel.ops.spec import Attrs, Inputs, KernelParams, Shape, register


@dataclass(frozen=True)
class GatherParams(KernelParams):
    """The source's shape, the output's (the indices') shape, and the dim picked along."""

    source_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    dim: int


def gather(x: Any, dim: int, indices: Any) -> np.ndarray:
    """Elements of `x` picked along `dim` by an index array of `x`'s rank.

    out[i][j][k] = x[i][indices[i][j][k]][k] for dim 1 (likewise for other dims). `indices` has
    `x`'s rank and `x`'s extent on every axis but `dim`; the output has `indices`' shape and `x`'s
    dtype, a fresh contiguous array. Accepts any lazyfuel dtype and layout, negative `dim`, and
    integer indices of any dtype; a 0-d `x` or index counts as one element along dim 0.

    Raises:
        IndexError: `dim` out of range, or an index < 0 or >= x.shape[dim] (value and position).
        TypeError: `x` has no lazyfuel dtype, or the indices are not integers.
        ValueError: the index shape does not fit `x` (expected and got).

    >>> gather(np.array([[1, 2], [3, 4]], np.int64), 1, [[0, 0], [1, 0]])
    array([[1, 1],
           [4, 3]])
    """
    a = bits.checked_array(x)
    d = checks.check_gather_shapes(a.shape, np.shape(indices), dim)
    src_shape = a.shape or (1,)
    idx = checks.as_indices(indices, src_shape[d])
    out = np.take_along_axis(bits.bits(a).reshape(src_shape), idx.reshape(idx.shape or (1,)), axis=d)
    return bits.fresh(out.reshape(idx.shape), a.dtype)


def plan(shapes: Sequence[Sequence[int]], dtype: DType,
         attrs: Mapping[str, Any]) -> tuple[GatherParams, Shape]:
    """The step's params; the output has the indices' shape."""
    return GatherParams(tuple(shapes[0]), tuple(shapes[1]), attrs["dim"]), tuple(shapes[1])


def cut(attrs: Mapping[str, Any], axis: int, shapes: list[Any]) -> list[int | None]:
    """Halving the output (the indices' shape) along `axis`: the indices are cut there, and the
    source too unless `axis` is `dim` (then it is needed whole)."""
    return [None, axis] if axis == attrs["dim"] else [axis, axis]


def _inputs(dtypes: tuple[DType, ...], shape: Shape, dim: int, n_indices: int,
            rng: np.random.Generator) -> tuple[Inputs, Attrs]:
    src = random_array(rng, dtypes[0], shape)
    idx_shape = (*shape[:dim], n_indices, *shape[dim + 1:])
    idx = rng.integers(0, max(shape[dim], 1), idx_shape).astype(dtypes[1].numpy)
    return [src, idx], {"dim": dim}


# shaders/gather.comp: `inner` elements past dim, `M` output and `S` source extents along dim
PUSH = PushLayout.of("uint64_t src", "uint64_t dst", "uint64_t aux", "uint64_t status", "uint64_t base",
                     "uint64_t n", "uint inner", "uint M", "uint S")


SPEC = register(data_mover(
    _inputs, 1, kind=OpKind.Gather, name="gather", inputs=(("source", None), ("indices", INDICES_U32)),
    dtype_rule=DtypeRule("source"), params_type=GatherParams, plan=plan,
    reference=lambda a, at: gather(a[0], at["dim"], a[1]), chunking=by_indices, cut=cut,
    shape=lambda attrs, s: s[1], shader="gather", push=PUSH))
