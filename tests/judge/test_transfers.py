"""Kernel-clocked judgements and the transfer term: what the judge fits from which clock, the
transfer term measured and cached by version, and the planner adding it per program: transfers
decide between backends, kernel costs decide among one backend's bindings."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from lazyfuel.backends.base import executor
from lazyfuel.backends.cpu import fingerprint as cpu_fingerprint
from lazyfuel.backends.cpu.executor import CpuExecutor
from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.judge import (
    JUDGE_VERSION,
    Judge,
    Judgement,
    MeasuredCosts,
    Point,
    TransferJudgement,
    UnmeasuredCostWarning,
    judgement_key,
    transfer_key,
)
from lazyfuel.judge.costs import reset_warning
from lazyfuel.judged_costs import device_fingerprint, measured_costs
from lazyfuel.layout import Layout
from lazyfuel.planner import Chain, OpNode, Planner
from lazyfuel.planner.chain import encode_key
from lazyfuel.planner.explain import describe_choices, describe_program
from lazyfuel.providers import available_backends, default_registry

needs_vulkan = pytest.mark.skipif(Backend.Vulkan not in available_backends(), reason="no Vulkan device here")

SELECT = Chain(2, (OpNode("IndexSelect", (0, 1), (("dim", 0),)),), (2,))
CONTIGUOUS = Chain(1, (OpNode("getitem", (0,), (("key", encode_key((slice(1, None),))),)),
                       OpNode("Contiguize", (1,), ())), (2,))


def _f32(op: OpKind, backend: Backend, source: str | None = None):
    return next(b for b in default_registry().bindings() if b.op_kind is op and b.backend is backend
                and b.dtypes[0] is DType.F32 and (source is None or b.kernel_source == source))


class _ClockedCpu(CpuExecutor):
    """The real Cpu executor, reporting a fixed device clock: what the judge fits must be it."""

    def time_kernels(self, program, inputs):
        self.run(program, inputs)
        return 1e-3


def test_the_judge_fits_kernel_time_where_the_runner_clocks_it_and_wall_time_elsewhere(cache, tiny) -> None:
    b = _f32(OpKind.MaskedFill, Backend.Cpu)
    (clocked,) = Judge(_ClockedCpu(), "clocked cpu", cache, budget=tiny).judge([b])
    j = clocked.judgement
    assert j.clock == "kernel" and [p.seconds for p in j.points] == [1e-3, 1e-3]
    assert j.latency_s == pytest.approx(1e-3) and j.seconds_per_byte == pytest.approx(0.0, abs=1e-18)
    (wall,) = Judge(executor(Backend.Cpu), cpu_fingerprint(), cache, budget=tiny).judge([b])
    assert wall.judgement.clock == "wall" and wall.judgement.points[0].seconds != 1e-3


@needs_vulkan
def test_vulkan_is_judged_by_kernel_time_with_its_transfers_measured_and_cached(cache, tiny) -> None:
    b = _f32(OpKind.Contiguize, Backend.Vulkan, "lazyfuel-glsl")
    copy = _f32(OpKind.Contiguize, Backend.Vulkan, "vulkan-copy-buffer")
    runner, fingerprint = executor(Backend.Vulkan), device_fingerprint(Backend.Vulkan)
    v, c = Judge(runner, fingerprint, cache, budget=tiny).judge([b, copy])
    assert v.judgement.clock == "kernel" and all(p.seconds > 0 for p in v.judgement.points)
    # the shader was timed on two views: its dense line is kept beside the slower one
    assert v.judgement.dense_seconds_per_byte is not None and c.judgement.dense_seconds_per_byte is None
    key = transfer_key(Backend.Vulkan, fingerprint, runner.transfer_mode)
    (stored,) = cache.load_transfers().values()
    assert stored.key == key and stored.mode == runner.transfer_mode and stored.submit_s > 0
    assert [p.n for p in stored.up_points] == [p.n for p in stored.down_points] == list(tiny.transfer_bytes)
    assert all(p.seconds > 0 for p in (*stored.up_points, *stored.down_points))
    judge = Judge(runner, fingerprint, cache, budget=tiny)
    assert judge.judge_transfer() == stored  # cached: not measured again
    assert judge.judge_transfer(force=True).measured_at >= stored.measured_at
    costs = measured_costs(backends=[Backend.Vulkan], cache=cache)
    assert costs.transfers[Backend.Vulkan].key == key
    one_mib = costs.transfer_cost(Backend.Vulkan, [1 << 20], [1 << 20])
    # not `>`: in zero-copy mode 4 KiB and 1 MiB may time alike, and a fit with no per-byte cost
    # and a latency at the submit's leaves a transfer costing the submit alone
    measured = costs.transfers[Backend.Vulkan]
    assert one_mib == pytest.approx(measured.seconds([1 << 20], [1 << 20]))
    assert one_mib >= measured.submit_s > 0


def test_entries_of_an_older_judge_version_are_measured_again(cache, tiny) -> None:
    b = _f32(OpKind.Gather, Backend.Cpu)
    judge = Judge(executor(Backend.Cpu), cpu_fingerprint(), cache, budget=tiny)
    (first,) = judge.judge([b])
    old_key = judgement_key(b, cpu_fingerprint()).replace(f"v{JUDGE_VERSION}/", f"v{JUDGE_VERSION - 1}/", 1)
    data = json.loads(cache.path.read_text())
    (entry,) = data["judgements"].values()
    data["judgements"] = {old_key: {**entry, "key": old_key, "judge_version": JUDGE_VERSION - 1}}
    old_transfer = transfer_key(Backend.Vulkan, "dev", "staged").replace(f"v{JUDGE_VERSION}/", "v2/", 1)
    data["transfers"] = {old_transfer: {**_transfer().to_json(), "key": old_transfer, "judge_version": 2}}
    cache.path.write_text(json.dumps(data))
    assert cache.load() == {} and cache.load_transfers() == {}  # an old version is never read
    (again,) = judge.judge([b])
    assert again.measured and again.judgement.key == first.judgement.key
    assert list(json.loads(cache.path.read_text())["judgements"]) == [first.judgement.key]
    cache.put_transfer(_transfer())
    assert list(json.loads(cache.path.read_text())["transfers"]) == [_transfer().key]  # v2 replaced


# -- the planner with fixed costs ---------------------------------------------------------------

def _judged(binding, latency: float, per_byte: float, clock: str) -> Judgement:
    return Judgement(key=judgement_key(binding, "dev"), device_fingerprint="dev",
                     kernel_source=binding.kernel_source, symbol=binding.symbol,
                     dtypes="[" + ",".join(d.name for d in binding.dtypes) + "]",
                     revision_hash=binding.revision_hash, latency_s=latency, seconds_per_byte=per_byte,
                     dispatch_s=latency, spread=0.01, points=(Point(256, 1.0, latency, 0.01, 3),),
                     quick=True, measured_at="2026-11-29T00:00:00+00:00", clock=clock)


def _transfer(submit: float = 200e-6, per_byte: float = 1e-9) -> TransferJudgement:
    """A device behind a slow bus: `submit` per program, 1 GB/s each way, 10 µs per array."""
    return TransferJudgement(key=transfer_key(Backend.Vulkan, "dev", "staged"), device_fingerprint="dev",
                             backend="Vulkan", mode="staged", submit_s=submit,
                             up_latency_s=submit + 10e-6, up_seconds_per_byte=per_byte,
                             down_latency_s=submit + 10e-6, down_seconds_per_byte=per_byte, spread=0.01,
                             up_points=(), down_points=(), quick=True,
                             measured_at="2026-11-29T00:00:00+00:00")


BUS = _transfer()


def _costs(vulkan_per_byte: dict[str, float], cpu_per_byte: float = 1e-10,
           transfer: TransferJudgement | None = BUS) -> MeasuredCosts:
    """Every F32 Vulkan binding kernel-clocked at 2 µs + bytes x its source's s/B (default 1e-12),
    every F32 Cpu binding wall-clocked at 5 µs + bytes x `cpu_per_byte`; Vulkan's `transfer`."""
    found = {}
    for b in default_registry().bindings():
        if b.dtypes[0] is not DType.F32:
            continue
        if b.backend is Backend.Vulkan:
            found[b] = _judged(b, 2e-6, vulkan_per_byte.get(b.kernel_source, 1e-12), "kernel")
        elif b.backend is Backend.Cpu:
            found[b] = _judged(b, 5e-6, cpu_per_byte, "wall")
    return MeasuredCosts(found, {Backend.Vulkan: transfer} if transfer is not None else {})


def _signature(source_shape=(1024, 64), transposed: bool = False):
    """index_select's inputs: a source (the transpose of a contiguous array where `transposed`,
    as a chunk viewed by transpose reaches the planner) and as many indices as it has rows."""
    x = np.zeros(source_shape, np.float32)
    x = x.T if transposed else x
    idx = np.arange(x.shape[0], dtype=np.uint32)
    return [DType.F32, DType.U32], [Layout.of(x), Layout.of(idx)]


def test_a_program_pays_its_transfers_once_and_explain_shows_them() -> None:
    costs = _costs({})
    program = Planner(default_registry(), [Backend.Vulkan], costs=costs).plan(SELECT, *_signature())
    up, down = program.transfer_bytes()
    assert up == [1024 * 64 * 4, 1024 * 4] and down == [1024 * 64 * 4]
    assert program.transfer_cost == pytest.approx(_transfer().seconds(up, down))
    assert program.transfer_cost == pytest.approx(200e-6 + 3 * 10e-6 + (sum(up) + sum(down)) * 1e-9)
    assert program.cost == pytest.approx(program.steps_cost + program.transfer_cost)
    assert "transfers ~" in describe_program(program)
    assert "bytes per link: Vulkan up 260.0 KiB (2 array(s)), down 256.0 KiB (1 array(s))" in \
        describe_program(program)
    assert "+ transfers ~" in describe_choices(program)


def test_transfers_send_the_chain_to_cpu_though_vulkan_kernels_are_cheaper() -> None:
    costs = _costs({})  # Vulkan kernels ~100x faster than Cpu, but a 1 GB/s bus
    planner = Planner(default_registry(), [Backend.Vulkan, Backend.Cpu], costs=costs)
    program = planner.plan(SELECT, *_signature())
    assert program.backend is Backend.Cpu and program.transfer_cost == 0.0
    (backend_choice,) = [c for c in program.choices if c.what == "backend"]
    vulkan = next(c for c in backend_choice.candidates if "Vulkan" in c.plan)
    assert vulkan.transfer > 0.9 * vulkan.cost  # the transfers are what made Vulkan dearer
    free_bus = _costs({}, transfer=_transfer(submit=1e-6, per_byte=0.0))
    assert Planner(default_registry(), [Backend.Vulkan, Backend.Cpu],
                   costs=free_bus).plan(SELECT, *_signature()).backend is Backend.Vulkan


@pytest.mark.parametrize("faster", ["lazyfuel-glsl", "vulkan-copy-buffer"])
def test_within_vulkan_the_cheaper_contiguize_kernel_wins_whatever_the_transfers(faster: str) -> None:
    slower = {"lazyfuel-glsl": "vulkan-copy-buffer", "vulkan-copy-buffer": "lazyfuel-glsl"}[faster]
    costs = _costs({faster: 1e-12, slower: 1e-11})
    x = np.zeros((1025, 64), np.float32)
    program = Planner(default_registry(), [Backend.Vulkan], costs=costs).plan(
        CONTIGUOUS, [DType.F32], [Layout.of(x)])
    (step,) = program.steps
    assert step.binding.kernel_source == faster
    assert program.transfer_cost > 10 * program.steps_cost  # the bus dominates the program
    (choice,) = [c for c in program.choices if c.what.startswith("Contiguize")]
    assert choice.why.startswith("cheaper")


@pytest.mark.parametrize("strided_per_byte, expect_strided", [(1e-12, True), (1e-10, False)])
def test_within_vulkan_the_cheaper_strided_plan_wins_whatever_the_transfers(strided_per_byte: float,
                                                                           expect_strided: bool) -> None:
    costs = _costs({"lazyfuel-glsl-strided": strided_per_byte, "vulkan-slang": 1e-11,
                    "lazyfuel-glsl": 1e-11, "vulkan-copy-buffer": 1e-11})
    program = Planner(default_registry(), [Backend.Vulkan], costs=costs).plan(
        SELECT, *_signature((64, 1024), transposed=True))
    sources = [s.binding.kernel_source for s in program.steps]
    assert (sources == ["lazyfuel-glsl-strided"]) is expect_strided
    assert program.transfer_cost > program.steps_cost


def test_kernel_clocked_costs_without_transfers_warn_once_and_add_none() -> None:
    reset_warning()
    costs = _costs({}, transfer=None)
    with pytest.warns(UnmeasuredCostWarning, match="transfers of Vulkan"):
        program = Planner(default_registry(), [Backend.Vulkan], costs=costs).plan(SELECT, *_signature())
    assert program.transfer_cost == 0.0 and costs.transfer_cost(Backend.Cpu, [8], [8]) == 0.0


def test_a_dense_view_is_priced_by_the_dense_line_and_a_strided_one_by_the_slower() -> None:
    shader = _f32(OpKind.Contiguize, Backend.Vulkan, "lazyfuel-glsl")
    slow_strided = {shader: replace(_judged(shader, 2e-6, 1e-9, "kernel"), dense_seconds_per_byte=1e-12)}
    costs = MeasuredCosts(slow_strided)
    dense = {"shape": (64, 64), "strides": (64, 1), "offset": 64, "dtype_bytes": 4, "n": 4096}
    transposed = {**dense, "strides": (1, 64), "offset": 0}
    moved = shader.contract.cost.bytes_moved.evaluate(dense)
    assert costs.step_cost(shader, dense) == pytest.approx(2e-6 + moved * 1e-12)
    assert costs.step_cost(shader, transposed) == pytest.approx(2e-6 + moved * 1e-9)
