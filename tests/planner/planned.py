"""One planned program the planner-module tests read: index_select of rows then masked_fill, on the
Cpu backend, over a (6, 5) float32 source, 4 uint32 indices and a (4, 5) bool mask."""

from __future__ import annotations

import numpy as np

from lazyfuel.contracts.model import Backend
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.planner import Chain, OpNode, Planner
from lazyfuel.planner.program import Program
from lazyfuel.providers import default_registry

SELECT_FILL = Chain(3, (OpNode("IndexSelect", (0, 1), (("dim", 0),)),
                        OpNode("MaskedFill", (3, 2), (("value", -1.0),))), (4,))
SHAPES = ((6, 5), (4,), (4, 5))
DTYPES = (DType.F32, DType.U32, DType.BOOL)


def select_fill_program(backend: Backend = Backend.Cpu) -> Program:
    """SELECT_FILL planned for `backend` over contiguous inputs of SHAPES and DTYPES."""
    planner = Planner(default_registry(), [backend])
    return planner.plan(SELECT_FILL, list(DTYPES), [Layout.contiguous(s) for s in SHAPES])


def inputs(seed: int) -> list[np.ndarray]:
    """Fresh random inputs of SHAPES and DTYPES."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(SHAPES[0]).astype(np.float32), rng.integers(0, 6, 4).astype(np.uint32),
            rng.random(SHAPES[2]) < 0.5]
