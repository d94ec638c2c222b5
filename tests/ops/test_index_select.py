"""index_select's spec (`ops.index_select`): its params record, frozen, a mapping in field order."""

from __future__ import annotations

import pytest

from lazyfuel.contracts.model import OpKind
from lazyfuel.dtypes import DType
from lazyfuel.ops import spec_for
from lazyfuel.ops.index_select import IndexSelectParams
from lazyfuel.planner.program import Step


def test_params_records_are_frozen_mappings_in_field_order() -> None:
    params, out_shape = spec_for(OpKind.IndexSelect).params([(3, 4, 5), (7,)], DType.F32, {"dim": 1})
    assert params == IndexSelectParams(outer_count=3, source_dim_size=4, n_indices=7, inner_count=5)
    assert out_shape == (3, 7, 5)
    assert tuple(params.items()) == (("outer_count", 3), ("source_dim_size", 4), ("n_indices", 7),
                                     ("inner_count", 5))
    assert params["inner_count"] == 5 and dict(params)["n_indices"] == 7
    with pytest.raises(KeyError):
        params["dim"]
    with pytest.raises(AttributeError):
        params.n_indices = 8  # type: ignore[misc]
    step = Step(None, (0, 1), tuple(params.items()), out_shape, DType.F32)  # type: ignore[arg-type]
    assert IndexSelectParams.of(step.param) == params
