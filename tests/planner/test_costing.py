"""What a cost expression sees (`planner.costing.cost_env`): the step's numeric params, the element
size and the output's element count; bytes and strings left out."""

from __future__ import annotations

from planned import select_fill_program

from lazyfuel.planner.costing import cost_env


def test_the_cost_env_is_the_numeric_params_the_element_size_and_n() -> None:
    select, fill = select_fill_program().steps
    assert cost_env(select.binding, select.param, select.out_shape) == {
        "outer_count": 1, "source_dim_size": 6, "n_indices": 4, "inner_count": 5, "dtype_bytes": 4, "n": 20}
    assert cost_env(fill.binding, {**fill.param, "norm": "ortho"}, (2, 3)) == {"dtype_bytes": 4, "n": 6}
