"""Building one backend's program from a chain (`planner.builder`): views fold into the next step's
layout, a Contiguize node copies the view it is given (its params the view in its source's span),
and the program runs bit-exact against numpy."""

from __future__ import annotations

import numpy as np

from lazyfuel.backends.base import executor
from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.planner import Chain, OpNode, Planner
from lazyfuel.planner.chain import encode_key
from lazyfuel.providers import default_registry


def test_views_fold_into_one_contiguize_of_the_view_bit_exact() -> None:
    data = np.random.default_rng(22).standard_normal((6, 4)).astype(np.float32)
    chain = Chain(1, (OpNode("transpose", (0,), (("axes", (1, 0)),)),                   # v1 (4, 6)
                      OpNode("getitem", (1,), (("key", encode_key((slice(None, None, -1),))),)),  # v2
                      OpNode("Contiguize", (2,), ())), (3,))
    program = Planner(default_registry(), [Backend.Cpu]).plan(chain, [DType.F32], [Layout.of(data)])
    assert [s.binding.op_kind for s in program.steps] == [OpKind.Contiguize]
    assert program.steps[0].param == {"shape": (4, 6), "strides": (-1, 4), "offset": 3}
    (out,) = executor(Backend.Cpu).run(program, [data])
    assert out.tobytes() == np.ascontiguousarray(data.T[::-1]).tobytes()
