"""What a planning step costs: the judge's `CostModel` protocol, the cost environment and the
comparison of two costs.

Costs come from each binding's `cost_fn` (the shared priors of `lazyfuel.registry.cost`) unless the
planner is given a `CostModel` (the judge's measurements, `lazyfuel.judge.MeasuredCosts`): then a
step costs what the model says, the first step of a program also pays the model's per-program
overhead (a submit and its wait are paid once per program, not per step), and a candidate replaces
the incumbent only when it is cheaper by more than the measured noise of both, so ties go to the
earlier backend in `backends` and the earlier binding in the registry (the declared priority) and
plans stay stable run to run. The model also prices a program's transfers apart from its steps
(`CostModel.transfer_cost` per device link: one submit, the inputs in and the results out; zero for
a backend whose steps were timed by wall clock), counting only what moves given where the inputs
are and the result is wanted (`planner.placement`: a block resident on the device uploads nothing,
a resident block read on the host pays a download, a result kept on the device no download):
`Program.transfer_cost` is part of what the backend choice compares, and plays no part in choosing
among one backend's bindings, which move the same data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from lazyfuel.contracts.model import Backend
from lazyfuel.planner.choice import cost_source
from lazyfuel.registry import Binding


class CostModel(Protocol):
    """Costs the planner uses instead of each binding's `cost_fn` (implemented by the judge layer)."""

    def step_cost(self, binding: Binding, env: Mapping[str, Any]) -> float:
        """Seconds one more step of `binding` adds to a program, for the cost environment `env`."""
        ...

    def program_overhead(self, binding: Binding) -> float:
        """Seconds a program pays once when `binding` is its first step (submit, wait, transfers)."""
        ...

    def transfer_cost(self, backend: Backend, up: Sequence[int], down: Sequence[int]) -> float:
        """Seconds a program on `backend` pays besides its steps: a submit, inputs of `up` bytes in
        and results of `down` bytes out (0 where the steps' costs already include them)."""
        ...

    def noise(self, binding: Binding) -> float:
        """Relative spread of `binding`'s measured cost (0 when unmeasured): the width of a tie."""
        ...

    def measured(self, binding: Binding) -> bool:
        """Whether `binding`'s cost comes from a measurement (else from the shared priors)."""
        ...


def _source(costs: CostModel | None, bindings: Sequence[Binding]) -> str:
    """Where the costs of `bindings` come from (see `choice.cost_source`)."""
    return cost_source([costs is not None and costs.measured(b) for b in bindings])


def cost_env(binding: Binding, params: Mapping[str, Any], out_shape: Sequence[int]) -> dict[str, Any]:
    """The names a cost expression sees: the op params (bytes and strings left out), `dtype_bytes`, `n`."""
    env = dict(params, dtype_bytes=binding.dtypes[0].itemsize, n=math.prod(out_shape))
    return {k: v for k, v in env.items() if not isinstance(v, (bytes, str))}


def _cost(binding: Binding, params: Mapping[str, Any], out_shape: tuple[int, ...],
          costs: CostModel | None = None) -> float:
    env = cost_env(binding, params, out_shape)
    if costs is not None:
        return costs.step_cost(binding, env)
    return binding.cost_fn(env) if binding.cost_fn is not None else 0.0


def _cheaper(cost: float, than: float, costs: CostModel | None, bindings: Sequence[Binding]) -> bool:
    """`cost` beats `than`: strictly without a model; by more than the bindings' noise with one."""
    if costs is None:
        return cost < than
    noise = max((costs.noise(b) for b in bindings), default=0.0)
    return cost < than * (1.0 - noise)
