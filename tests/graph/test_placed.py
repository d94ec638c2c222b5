"""`graph/placed.py`: a `compute(device=True)` result's one allocation reserved before its tasks
run, each placed recipe finding its part of it while the compute runs, on the real device pool."""

from __future__ import annotations

import numpy as np

import lazyfuel as lf
from lazyfuel.graph import placed
from lazyfuel.graph.resident import plan_of, result_holder
from lazyfuel.settings import config


def _plan() -> placed.Plan:
    table = np.random.default_rng(61).standard_normal((4000, 8)).astype(np.float32)
    y = lf.from_array(table, chunks=(1000, 8)).index_select(0, lf.from_array(np.arange(3000), chunks=1000))
    with config(_resident=True):
        found = plan_of(y.to_dask())
    assert found is not None
    return found


def test_a_placed_compute_gives_each_recipe_its_part_and_a_second_finds_them_taken(vulkan) -> None:
    plan = _plan()
    assert [offset for _, offset in plan.places] == [0, 1000 * 32, 2000 * 32]
    recipes = [recipe for recipe, _ in plan.places]
    with placed.placing(plan, result_holder(None)) as whole:
        assert whole is not None and whole.shape == (3000, 8)
        parts = [placed.part_for(recipe) for recipe in recipes]
        assert all(p.lies_in(whole, offset) for p, (_, offset) in zip(parts, plan.places))
        with placed.placing(plan, result_holder(None)) as again:
            assert again is None  # the same recipes in flight: that compute assembles as before
    assert all(placed.part_for(recipe) is None for recipe in recipes)


def test_nothing_is_placed_without_a_plan_or_a_holder(vulkan) -> None:
    with placed.placing(None, result_holder(None)) as whole:
        assert whole is None
    with placed.placing(_plan(), None) as whole:
        assert whole is None
    assert result_holder(1) is None  # only device 0 of one: over several devices `assembled` decides
