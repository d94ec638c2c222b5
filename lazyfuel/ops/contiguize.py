"""Contiguize (`lf.contiguous`, and what the planner inserts before a kernel that needs contiguous
input): a fresh row-major copy of any view, bit for bit.

Its step params are the view's layout relative to the memory span of the value it copies
(`ContiguizeParams.of(layout)`), not a rule over shapes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from lazyfuel.contracts.model import DtypeRule, KernelContract, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.ops import bits
from lazyfuel.ops.common import by_rows, data_mover, rows_of
from lazyfuel.ops.data import random_array
from lazyfuel.ops.push import PushLayout
from lazyfuel.ops.spec import Attrs, Inputs, KernelParams, Shape, Timed, register


@dataclass(frozen=True)
class ContiguizeParams(KernelParams):
    """The view copied: `shape`, `strides` and `offset` in elements of its memory span."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int

    @classmethod
    def of_layout(cls, layout: Layout) -> ContiguizeParams:
        return cls(layout.shape, layout.strides, layout.offset)


def contiguize(x: Any) -> np.ndarray:
    """A fresh C-contiguous copy of `x` (any lazyfuel dtype and layout), bit for bit.

    Raises:
        TypeError: `x` has no lazyfuel dtype.
    """
    a = bits.checked_array(x)
    return np.array(bits.bits(a), order="C", copy=True).view(a.dtype)


def _inputs(dtypes: tuple[DType, ...], shape: Shape, dim: int, n_indices: int,
            rng: np.random.Generator) -> tuple[Inputs, Attrs]:
    return [random_array(rng, dtypes[0], shape)], {}


def _ladder(contract: KernelContract, dtypes: tuple[DType, ...], n: int,
            rng: np.random.Generator) -> tuple[Timed, ...]:
    """The views a Contiguize binding is timed on, about `n` elements in rows of 64 (docs/decisions.md).

    First a dense view at a start offset (rows 1.. of an array one row taller): every Contiguize
    binding accepts it, so the buffer copy and the copy shader are compared on the same view at
    each rung, which is where the planner chooses between them. Then, where the binding's caps
    accept one, a transposed view (what the planner inserts Contiguize for ahead of a contiguous
    kernel): the judge keeps the slower of the two at each rung, so a binding that reads strided
    views is never priced below what a strided view costs it.
    """
    rows, cols = rows_of(n)
    (base,), attrs = _inputs(dtypes, (rows + 1, cols), 0, rows + 1, rng)
    dense = Layout((rows, cols), (cols, 1), cols)  # base[1:], located in base's buffer
    timed = [Timed([base], attrs, view=dense)]
    (stored,), _ = _inputs(dtypes, (cols, rows), 0, cols, rng)
    if contract.inputs[0].layout.violation(Layout.of(stored.T)) is None:
        timed.append(Timed([stored.T], attrs))
    return tuple(timed)


# shaders/contiguize.comp: a view of up to 8 dims; the spare stride slot holds the offset
PUSH = PushLayout.of("uint64_t src", "uint64_t dst", "uint64_t base", "uint64_t n", "uint shape[8]",
                     "int64_t strides[8]")


SPEC = register(data_mover(
    _inputs, ladder=_ladder, kind=OpKind.Contiguize, name="contiguous", inputs=(("source", None),),
    dtype_rule=DtypeRule("source"), params_type=ContiguizeParams, plan=None,
    reference=lambda a, at: contiguize(a[0]), chunking=by_rows, blockwise=True,
    cut=lambda attrs, axis, shapes: [axis], shape=lambda attrs, s: s[0], shader="contiguize", push=PUSH))
