"""SelectFill: an index_select, then the masked_fill of its result, as one op. Never built by the
graph: the planner puts it in place of such a pair where a backend binds it (`planner.fusion`; on
Vulkan the `select_fill` shader, whose selected rows never reach device memory).

Its params are index_select's and masked_fill's together (`SelectFillParams`), its inputs the
select's source and indices and the fill's mask (of the selection's shape), its reference the two
references in a row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lazyfuel import checks
from lazyfuel.contracts.model import DtypeRule, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.ops import index_select as select_op
from lazyfuel.ops.common import by_indices, data_mover
from lazyfuel.ops.data import fill_value
from lazyfuel.ops.masked_fill import masked_fill
from lazyfuel.ops.push import PushLayout
from lazyfuel.ops.spec import Attrs, Case, Inputs, KernelParams, Shape, register


@dataclass(frozen=True)
class SelectFillParams(KernelParams):
    """index_select's view of the source, and the fill value as one element's bytes."""

    outer_count: int
    source_dim_size: int
    n_indices: int
    inner_count: int
    fill_bytes: bytes


def plan(shapes: Sequence[Sequence[int]], dtype: DType,
         attrs: Mapping[str, Any]) -> tuple[SelectFillParams, Shape]:
    """index_select's params over (source, indices) and masked_fill's fill bytes; the select's shape."""
    select, out_shape = select_op.plan(shapes[:2], dtype, attrs)
    return SelectFillParams(*select.values(), checks.fill_bytes(attrs["value"], dtype)), out_shape


def _inputs(dtypes: tuple[DType, ...], shape: Shape, dim: int, n_indices: int,
            rng: np.random.Generator) -> tuple[Inputs, Attrs]:
    """index_select's inputs, and masked_fill's mask (of the selection's shape) and fill value."""
    (src, idx), attrs = select_op.SPEC.make_inputs(dtypes, shape, dim, n_indices, rng)
    mask = rng.random((*shape[:dim], n_indices, *shape[dim + 1:])) < 0.5
    return [src, idx, mask], {**attrs, "value": fill_value(src, rng)}


# select_fill runs rows of whole 16-byte words (its `misfit`): inner extents of 16 and 32 elements
CASES = (Case((37, 16), 0, 50), Case((5, 6, 16), 1, 9), Case((3, 4, 32), 0, 1), Case((2, 3, 16), 1, 7),
         Case((1, 48), 0, 3), Case((64, 32), 0, 64), Case((7, 2, 2, 16), 1, 5), Case((16, 64), 0, 20))

# shaders/select_fill.comp: 16-byte words; `fill` repeated over 16 bytes, `mask` one byte an element
PUSH = PushLayout.of("uint64_t src", "uint64_t dst", "uint64_t aux", "uint64_t status", "uint64_t base",
                     "uint64_t n", "uvec4 fill", "uint64_t mask", "uint R", "uint n_idx", "uint dim_size",
                     "uint mask_div[4]", "uint mask_ext[4]")


SPEC = register(data_mover(
    _inputs, 0, kind=OpKind.SelectFill, name="select_fill",
    inputs=(*select_op.SPEC.inputs, ("mask", frozenset({DType.BOOL}))), dtype_rule=DtypeRule("source"),
    params_type=SelectFillParams, plan=plan,
    reference=lambda a, at: masked_fill(select_op.index_select(a[0], at["dim"], a[1]), a[2], at["value"]),
    chunking=by_indices, cases=CASES, view_cases=(), shader="select_fill", push=PUSH,
    streams=lambda params, k, itemsize: k == 2 or select_op.reads_as_stream(params, k, itemsize)))  # the mask
