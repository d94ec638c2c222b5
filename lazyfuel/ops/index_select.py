"""IndexSelect (`lf.index_select(x, dim, indices)`): slices of `x` along `dim` at 1-d indices.

The kernels see the source as [outer_count, source_dim_size, inner_count] and copy rows of
`inner_count` elements: `IndexSelectParams`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lazyfuel import checks
from lazyfuel.contracts.model import DtypeRule, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.layout import normalize_dim
from lazyfuel.ops import bits
from lazyfuel.ops.common import by_indices, data_mover
from lazyfuel.ops.contiguize import contiguize
from lazyfuel.ops.data import random_array
from lazyfuel.ops.push import PushLayout
from lazyfuel.ops.spec import Attrs, Inputs, KernelParams, Shape, register

INDICES_U32 = frozenset({DType.U32})  # what the planner hands a select kernel's indices as


@dataclass(frozen=True)
class IndexSelectParams(KernelParams):
    """The source as [outer_count, source_dim_size, inner_count]; `n_indices` rows taken."""

    outer_count: int
    source_dim_size: int
    n_indices: int
    inner_count: int


def check_index_shape(shape: Sequence[int]) -> None:
    """ValueError unless indices of `shape` are 1-d (or 0-d: one index)."""
    if len(shape) > 1:
        raise ValueError(f"index_select takes 1-d indices, got shape {tuple(shape)}; "
                         f"use gather for n-d indices or pass indices.ravel()")


def check_0d_count(count: int) -> None:
    """ValueError unless a 0-d source is given exactly one index (PyTorch's rule)."""
    if count != 1:
        raise ValueError(f"index_select on a 0-d array takes exactly one index, got {count}")


def index_select(x: Any, dim: int, indices: Any) -> np.ndarray:
    """Slices of `x` along `dim` at `indices`: out[..., i, ...] = x[..., indices[i], ...].

    Accepts `x` of any lazyfuel dtype and layout, `dim` negative or not, and 1-d (or 0-d: one
    index) indices of any integer dtype. The output is `x`'s shape with `shape[dim] =
    len(indices)`, a fresh contiguous array. A 0-d `x` takes exactly one index (0) and gives a
    0-d result, as in PyTorch.

    Raises:
        IndexError: `dim` out of range, or an index < 0 or >= x.shape[dim] (value and position).
        TypeError: `x` has no lazyfuel dtype, or the indices are not integers.
        ValueError: the indices have more than one dim, or a 0-d `x` got other than one index.

    >>> index_select(np.array([[1, 2, 3], [4, 5, 6]], np.int32), 1, [2, 0])
    array([[3, 1],
           [6, 4]], dtype=int32)
    """
    a = bits.checked_array(x)
    d = normalize_dim(dim, a.ndim)
    idx = checks.as_indices(indices, a.shape[d] if a.ndim else 1)
    check_index_shape(idx.shape)
    if a.ndim == 0:
        check_0d_count(idx.size)
        return contiguize(a)
    return bits.fresh(np.take(bits.bits(a), idx.reshape(-1), axis=d), a.dtype)


def plan(shapes: Sequence[Sequence[int]], dtype: DType,
         attrs: Mapping[str, Any]) -> tuple[IndexSelectParams, Shape]:
    """The step's params and output shape: the source's shape with `n_indices` along `dim`."""
    src, (n,) = tuple(shapes[0]), shapes[1]
    dim = attrs["dim"]
    params = IndexSelectParams(math.prod(src[:dim]), src[dim], n, math.prod(src[dim + 1:]))
    return params, (*src[:dim], n, *src[dim + 1:])


def cut(attrs: Mapping[str, Any], axis: int, shapes: list[Any]) -> list[int | None]:
    """Halving the output along `axis`: along `dim` the indices are cut and the source is needed
    whole; along another axis the source is cut there."""
    return [None, 0] if axis == attrs["dim"] else [axis, None]


def out_shape(attrs: Mapping[str, Any], shapes: list[Any]) -> Shape:
    """The source's shape with as many rows along `dim` as there are indices."""
    return tuple(math.prod(shapes[1]) if i == attrs["dim"] else n for i, n in enumerate(shapes[0]))


STREAMED_ROW_BYTES = 512  # index_select rows at least this long are read as streams


def reads_as_stream(params: Mapping[str, Any], k: int, itemsize: int) -> bool:
    """The indices (k == 1) once; the source as a stream when no more rows are picked than it has
    and each row holds at least `STREAMED_ROW_BYTES` (planner.streams, decision 47)."""
    row = int(params["inner_count"]) * itemsize
    fewer = int(params["n_indices"]) <= int(params["source_dim_size"])
    return k == 1 or (fewer and row >= STREAMED_ROW_BYTES)


def _inputs(dtypes: tuple[DType, ...], shape: Shape, dim: int, n_indices: int,
            rng: np.random.Generator) -> tuple[Inputs, Attrs]:
    src = random_array(rng, dtypes[0], shape)
    index = dtypes[1].numpy  # U32, or I64 (the Cpu kernels for axes past 2**32)
    idx = rng.integers(0, shape[dim], n_indices).astype(index) if shape[dim] else np.zeros(0, index)
    return [src, idx], {"dim": dim}


# shaders/index_select.comp: rows of `R` words; `base` and `n` count output words
PUSH = PushLayout.of("uint64_t src", "uint64_t dst", "uint64_t aux", "uint64_t status", "uint64_t base",
                     "uint64_t n", "uint R", "uint n_idx", "uint dim_size")


SPEC = register(data_mover(
    _inputs, 0, kind=OpKind.IndexSelect, name="index_select",
    inputs=(("source", None), ("indices", INDICES_U32)), dtype_rule=DtypeRule("source"),
    params_type=IndexSelectParams, plan=plan, reference=lambda a, at: index_select(a[0], at["dim"], a[1]),
    chunking=by_indices, cut=cut, shape=out_shape, shader="index_select", push=PUSH,
    streams=reads_as_stream))
