"""MaskedFill (`lf.masked_fill(x, mask, value)`): `x` with `value` where the bool mask is true.

The fill value is checked and turned into one element's bytes by `lazyfuel.checks.fill_bytes`
(the one rule and its messages); `MaskedFillParams` carries those bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lazyfuel import checks
from lazyfuel.contracts.model import DtypeRule, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.ops import bits
from lazyfuel.ops.common import by_rows, data_mover
from lazyfuel.ops.data import fill_value, random_array
from lazyfuel.ops.push import PushLayout
from lazyfuel.ops.spec import Attrs, Inputs, KernelParams, Shape, register


@dataclass(frozen=True)
class MaskedFillParams(KernelParams):
    """One element of the data's dtype, as bytes: what the kernel writes where the mask is set."""

    fill_bytes: bytes


def masked_fill(x: Any, mask: Any, value: Any) -> np.ndarray:
    """`x` with `value` (cast to x's dtype) where `mask` is true: a fresh contiguous array.

    `mask` must be bool and broadcast together with `x` (numpy rules): the result has their
    common shape, as `np.where(mask, value, x)`. The cast follows `lazyfuel.checks.fill_bytes`.
    Accepts any lazyfuel dtype and layout.

    Raises:
        TypeError: the mask is not bool (a uint8 mask is refused, not reinterpreted), `x` has no
            lazyfuel dtype, or `value` is not a scalar number.
        ValueError: the mask and `x` do not broadcast together, or x's dtype cannot hold `value`.

    >>> masked_fill(np.array([1.0, 2.0, 3.0]), np.array([True, False, True]), -1)
    array([-1.,  2., -1.])
    """
    a = bits.checked_array(x)
    m = checks.check_mask(mask)
    checks.masked_fill_shape(m.shape, a.shape)
    fill = bits.fill_word(checks.fill_bytes(value, DType.from_numpy(a.dtype)), a.dtype)
    return bits.fresh(np.where(m, fill, bits.bits(a)), a.dtype)


def plan(shapes: Sequence[Sequence[int]], dtype: DType,
         attrs: Mapping[str, Any]) -> tuple[MaskedFillParams, Shape]:
    """The fill value's bytes (checked against `dtype`); the output has the data's shape."""
    return MaskedFillParams(checks.fill_bytes(attrs["value"], dtype)), tuple(shapes[0])


def _inputs(dtypes: tuple[DType, ...], shape: Shape, dim: int, n_indices: int,
            rng: np.random.Generator) -> tuple[Inputs, Attrs]:
    data = random_array(rng, dtypes[0], shape)
    mask = rng.random(shape) < 0.5
    return [data, mask], {"value": fill_value(data, rng)}


# shaders/masked_fill.comp: 16-byte words; `fill` is the fill value repeated over 16 bytes
PUSH = PushLayout.of("uint64_t src", "uint64_t dst", "uint64_t aux", "uint64_t status", "uint64_t base",
                     "uint64_t n", "uvec4 fill", "uint mask_div[4]", "uint mask_ext[4]")


SPEC = register(data_mover(
    _inputs, 0, kind=OpKind.MaskedFill, name="masked_fill",
    inputs=(("data", None), ("mask", frozenset({DType.BOOL}))), dtype_rule=DtypeRule("data"),
    params_type=MaskedFillParams, plan=plan, reference=lambda a, at: masked_fill(a[0], a[1], at["value"]),
    chunking=by_rows, blockwise=True, cut=lambda attrs, axis, shapes: [axis, axis],
    shape=lambda attrs, s: s[0], shader="masked_fill", push=PUSH,
    streams=lambda params, k, itemsize: True))  # data and mask once, in order
