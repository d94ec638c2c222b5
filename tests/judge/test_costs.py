"""Measured costs in the planner: the cheaper backend wins, ties go to the declared priority,
programs pay their overhead once, and an unmeasured binding warns once per process."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.judge import JudgeCache, Judgement, MeasuredCosts, Point, UnmeasuredCostWarning, judgement_key
from lazyfuel.judge.costs import reset_warning
from lazyfuel.layout import Layout
from lazyfuel.planner import Chain, OpNode, Planner
from lazyfuel.providers import default_registry

SELECT = Chain(2, (OpNode("IndexSelect", (0, 1), (("dim", 0),)),), (2,))
SELECT_T = Chain(2, (OpNode("transpose", (0,), ()), OpNode("IndexSelect", (2, 1), (("dim", 0),))), (3,))


def _judged(binding, latency: float, per_byte: float, dispatch: float = 0.0, spread: float = 0.0,
            fingerprint: str = "test device") -> Judgement:
    return Judgement(key=judgement_key(binding, fingerprint), device_fingerprint=fingerprint,
                     kernel_source=binding.kernel_source, symbol=binding.symbol,
                     dtypes="[" + ",".join(d.name for d in binding.dtypes) + "]",
                     revision_hash=binding.revision_hash, latency_s=latency, seconds_per_byte=per_byte,
                     dispatch_s=dispatch, spread=spread, points=(Point(256, 1.0, latency, spread, 3),),
                     quick=True, measured_at="2026-11-29T00:00:00+00:00")


def _costs(per_backend: dict[Backend, tuple[float, float, float, float]]) -> MeasuredCosts:
    """Every F32 select/contiguize binding of a backend measured as (latency, s/B, dispatch, spread)."""
    found = {}
    for b in default_registry().bindings():
        if b.backend in per_backend and b.dtypes[0] is DType.F32:
            found[b] = _judged(b, *per_backend[b.backend])
    return MeasuredCosts(found)


def _signature(rows: int = 1024, cols: int = 64):
    x = np.zeros((rows, cols), np.float32)
    idx = np.arange(rows, dtype=np.uint32)
    return [DType.F32, DType.U32], [Layout.of(x), Layout.of(idx)]


def _backend(costs: MeasuredCosts, order=(Backend.Vulkan, Backend.Cpu), chain: Chain = SELECT) -> Backend:
    return Planner(default_registry(), list(order), costs=costs).plan(chain, *_signature()).backend


def test_the_measured_cheaper_backend_wins() -> None:
    fast_cpu = _costs({Backend.Vulkan: (200e-6, 1e-9, 50e-6, 0.01), Backend.Cpu: (20e-6, 1e-10, 5e-6, 0.01)})
    fast_vk = _costs({Backend.Vulkan: (20e-6, 1e-11, 5e-6, 0.01), Backend.Cpu: (20e-6, 1e-9, 5e-6, 0.01)})
    assert _backend(fast_cpu) is Backend.Cpu
    assert _backend(fast_vk) is Backend.Vulkan


def test_ties_within_measured_noise_go_to_the_declared_priority() -> None:
    # Cpu is 2% cheaper but the measurements spread 5%: a tie, so the first backend listed wins.
    tie = _costs({Backend.Vulkan: (102e-6, 1.02e-9, 0.0, 0.05), Backend.Cpu: (100e-6, 1e-9, 0.0, 0.05)})
    assert _backend(tie) is Backend.Vulkan
    assert _backend(tie, order=(Backend.Cpu, Backend.Vulkan)) is Backend.Cpu
    # The same 2% with 1% spread (floored at NOISE_FLOOR 3%) is still a tie; 10% is not.
    sharp = _costs({Backend.Vulkan: (110e-6, 1.1e-9, 0.0, 0.01), Backend.Cpu: (100e-6, 1e-9, 0.0, 0.01)})
    assert _backend(sharp) is Backend.Cpu


def test_a_program_pays_its_overhead_once() -> None:
    costs = _costs({Backend.Vulkan: (100e-6, 0.0, 10e-6, 0.0)})
    program = Planner(default_registry(), [Backend.Vulkan], costs=costs).plan(SELECT_T, *_signature())
    assert [s.binding.op_kind for s in program.steps] == [OpKind.Contiguize, OpKind.IndexSelect]
    assert program.steps[0].cost == pytest.approx(100e-6)  # overhead 90 µs + dispatch 10 µs
    assert program.steps[1].cost == pytest.approx(10e-6)
    assert program.cost == pytest.approx(110e-6)


def test_cost_fn_is_the_one_step_line_and_loads_from_the_cache(tmp_path) -> None:
    b = next(b for b in default_registry().bindings()
             if b.backend is Backend.Cpu and b.op_kind is OpKind.MaskedFill and b.dtypes[0] is DType.F32)
    cache = JudgeCache(tmp_path)
    cache.put([_judged(b, 30e-6, 1e-9, fingerprint="cpu X")])
    costs = MeasuredCosts.load(default_registry().bindings(), {Backend.Cpu: "cpu X"}, cache)
    assert len(costs) == 1 and costs.judgement(b) is not None
    env = {"n": 1000, "dtype_bytes": 4}
    assert costs.cost_fn(b)(env) == pytest.approx(30e-6 + (2 * 1000 * 4 + 1000) * 1e-9)
    assert len(MeasuredCosts.load(default_registry().bindings(), {Backend.Cpu: "cpu Y"}, cache)) == 0


def test_no_measurement_falls_back_to_the_shared_cost_and_warns_once() -> None:
    reset_warning()
    empty = MeasuredCosts()
    priors = Planner(default_registry(), [Backend.Cpu]).plan(SELECT, *_signature())
    with pytest.warns(UnmeasuredCostWarning, match="lazyfuel judge --quick"):
        planned = Planner(default_registry(), [Backend.Cpu], costs=empty).plan(SELECT, *_signature())
    assert planned.cost == pytest.approx(priors.cost)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Planner(default_registry(), [Backend.Vulkan, Backend.Cpu], costs=empty).plan(SELECT_T, *_signature())
