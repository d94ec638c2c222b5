"""SelectFill's spec (`ops.select_fill`): its params are index_select's and the fill's bytes
together, and its reference is the two references in a row, bit-exact against numpy."""

from __future__ import annotations

import numpy as np

from lazyfuel.contracts.model import OpKind
from lazyfuel.dtypes import DType
from lazyfuel.ops import spec_for
from lazyfuel.ops.select_fill import SelectFillParams, plan


def test_the_params_are_the_selects_and_the_fills_bytes() -> None:
    params, out = plan([(3, 4, 16), (5,), (3, 5, 16)], DType.F32, {"dim": 1, "value": 2.5})
    assert params == SelectFillParams(3, 4, 5, 16, np.float32(2.5).tobytes()) and out == (3, 5, 16)


def test_the_reference_selects_then_fills_bit_for_bit() -> None:
    spec = spec_for(OpKind.SelectFill)
    rng = np.random.default_rng(9)
    inputs, attrs = spec.make_inputs((DType.F32, DType.U32, DType.BOOL), (6, 16), 0, 4, rng)
    source, idx, mask = inputs
    got = spec.reference(inputs, attrs)
    want = np.where(mask, np.float32(attrs["value"]).view(np.uint32), source.view(np.uint32)[idx])
    assert mask.shape == (4, 16) and got.dtype == np.float32 and got.tobytes() == want.tobytes()
