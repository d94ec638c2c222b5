"""Measuring: the fit, the ladder on real executors (the FFT bindings of both providers included),
and re-measuring a patched kernel or driver."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

from lazyfuel.backends.base import executor
from lazyfuel.backends.cpu import fingerprint as cpu_fingerprint
from lazyfuel.backends.cpu.links import entry_points as cpu_entry_points
from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.judge import Judge, JudgeCache, Point, Progress, UnmeasuredCostWarning, fit_line
from lazyfuel.judge.workloads import ladder_workload, ladder_workloads, supported
from lazyfuel.judged_costs import device_fingerprint, measured_costs
from lazyfuel.layout import Layout
from lazyfuel.planner import Chain, OpNode, Planner
from lazyfuel.providers import CONTRACTS_DIR, available_backends, default_registry
from lazyfuel.registry import KernelRef, Registry, register_link_registry

# The code bytes the patched link registry reports; a test edits them like a rebuilt kernel.
PATCHED_CODE = {"bytes": b"kernel build 1"}
PATCHED = "test::judge::patched"


def _patched_entry_points() -> dict[str, KernelRef]:
    """The CPU kernels under new symbols, with code bytes read from PATCHED_CODE at hash time."""
    return {sym.replace("lazyfuel::cpu::", f"{PATCHED}::"):
            dataclasses.replace(ref, code=lambda: PATCHED_CODE["bytes"])
            for sym, ref in cpu_entry_points().items()}


def _cpu_document_as(name: str) -> Registry:
    """cpu.md linked through the link registry `name` (its symbols renamed into that namespace)."""
    text = (CONTRACTS_DIR / "cpu.md").read_text()
    text = text.replace("lazyfuel::cpu::ENTRY_POINTS", name).replace('"lazyfuel::cpu::', f'"{name}::')
    registry = Registry()
    registry.load(text)
    return registry


def _patched_registry() -> Registry:
    register_link_registry(PATCHED, _patched_entry_points)
    return _cpu_document_as(PATCHED)


def _explode(*args, **kwargs):
    raise RuntimeError("kernel exploded")


def _raising_entry_points() -> dict[str, KernelRef]:
    """The CPU kernels, except that index_select raises."""
    return {sym.replace("lazyfuel::cpu::", "test::judge::raising::"):
            dataclasses.replace(ref, impl=_explode, code=lambda: b"") if "index_select" in sym else ref
            for sym, ref in cpu_entry_points().items()}


def _pick(registry: Registry, op: str = "IndexSelect", dtype: str = "F32", backend: str = "Cpu"):
    return next(b for b in registry.bindings() if b.op_kind.name == op and b.dtypes[0].name == dtype
                and b.backend.name == backend)


def assert_timed_and_fitted(j) -> None:
    """What the judge guarantees of a measured binding, whatever the machine's load: every rung has
    a positive time on its clock, and the fitted line is non-negative and positive at every rung.
    Not that `latency_s > 0`: a tiny budget takes the median of two runs, so one run preempted on
    the big rung (a scheduler tick is 1-4 ms, the kernel 30 µs) tilts the line through the origin
    and the intercept is 0 (see the fit test below)."""
    assert all(p.seconds > 0 for p in j.points)
    assert j.latency_s >= 0 and j.seconds_per_byte >= 0
    assert all(j.latency_s + p.bytes_moved * j.seconds_per_byte > 0 for p in j.points)


def test_a_preempted_big_rung_gives_a_zero_latency_and_a_positive_line() -> None:
    """Why `latency_s > 0` is no promise: 2 KiB in 27 µs and 32 KiB in 27 µs + half a 4 ms tick
    (one of two runs preempted) put the unconstrained intercept below 0."""
    latency, per_byte = fit_line([Point(256, 2048.0, 27e-6, 0.0, 2), Point(4096, 32768.0, 2.027e-3, 0.0, 2)])
    assert latency == 0.0 and per_byte > 0


def test_fit_line_recovers_latency_and_bandwidth_and_stays_non_negative() -> None:
    pts = [Point(n, 8.0 * n, 50e-6 + 8.0 * n / 4e9, 0.0, 3) for n in (256, 4096, 65536, 1 << 20)]
    latency, per_byte = fit_line(pts)
    assert latency == pytest.approx(50e-6, rel=1e-6) and 1 / per_byte == pytest.approx(4e9, rel=1e-6)
    flat = [Point(n, 8.0 * n, 1e-4, 0.0, 3) for n in (256, 4096)]
    assert fit_line(flat) == pytest.approx((1e-4, 0.0), abs=1e-12)
    falling = [Point(256, 100.0, 2e-4, 0.0, 3), Point(4096, 1e6, 1e-4, 0.0, 3)]
    latency, per_byte = fit_line(falling)  # noise can make big runs look faster: never negative
    assert latency >= 0 and per_byte >= 0


def test_ladder_workloads_follow_the_contract_bytes_and_chain() -> None:
    rng = np.random.default_rng(0)
    for b in default_registry().bindings():
        if b.backend is not Backend.Cpu or b.dtypes[0].name != "F32" or not supported(b):
            continue
        one, four = ladder_workload(b, 4096, rng), ladder_workload(b, 4096, rng, steps=4)
        assert 4096 in (one.n, one.inputs[0].size)  # FFTs: a 4096-point signal, in or out
        assert len(one.program.steps) == 1 and len(four.program.steps) == 4
        assert one.bytes_moved >= 2 * 4096 * 4
        (out,) = executor(Backend.Cpu).run(four.program, list(four.inputs))
        assert out.shape == four.program.steps[-1].out_shape


def test_judge_measures_a_cpu_binding_then_reads_the_cache(cache: JudgeCache, tiny) -> None:
    b = _pick(default_registry())
    judge = Judge(executor(Backend.Cpu), cpu_fingerprint(), cache, budget=tiny)
    (first,) = judge.judge([b], progress=Progress())
    j = first.judgement
    assert first.measured and j.symbol == b.symbol and j.revision_hash == b.revision_hash
    assert [p.n for p in j.points] == [256, 4096] and all(p.seconds > 0 for p in j.points)
    assert 0 <= j.dispatch_s <= j.latency_s and j.spread >= 0
    assert_timed_and_fitted(j)
    (again,) = judge.judge([b])
    assert not again.measured and again.judgement == j
    (forced,) = judge.judge([b], force=True)
    assert forced.measured


def test_patched_kernel_bytes_change_the_revision_and_force_a_re_measure(cache: JudgeCache, tiny) -> None:
    PATCHED_CODE["bytes"] = b"kernel build 1"
    before = _pick(_patched_registry())
    judge = Judge(executor(Backend.Cpu), cpu_fingerprint(), cache, budget=tiny)
    assert judge.judge([before])[0].measured
    assert not judge.judge([before])[0].measured
    PATCHED_CODE["bytes"] = b"kernel build 2"  # the same symbol and contract, rebuilt code
    after = _pick(_patched_registry())
    assert after.symbol == before.symbol and after.revision_hash != before.revision_hash
    (verdict,) = judge.judge([after])
    assert verdict.measured and verdict.judgement.revision_hash == after.revision_hash
    stored = [j for j in cache.load().values() if j.symbol == after.symbol]
    assert [j.revision_hash for j in stored] == [after.revision_hash]  # the stale entry is gone


def test_a_changed_driver_is_measured_again(cache: JudgeCache, tiny) -> None:
    b = _pick(default_registry(), op="MaskedFill")
    cpu = executor(Backend.Cpu)
    assert Judge(cpu, "driver 1.0", cache, budget=tiny).judge([b])[0].measured
    assert not Judge(cpu, "driver 1.0", cache, budget=tiny).judge([b])[0].measured
    assert Judge(cpu, "driver 1.1", cache, budget=tiny).judge([b])[0].measured


def test_a_failing_kernel_is_reported_and_the_others_still_measured(cache: JudgeCache, tiny) -> None:
    register_link_registry("test::judge::raising", _raising_entry_points)
    registry = _cpu_document_as("test::judge::raising")
    bad, good = _pick(registry, "IndexSelect"), _pick(registry, "Gather")
    failed, measured = Judge(executor(Backend.Cpu), cpu_fingerprint(), cache, budget=tiny).judge([bad, good])
    assert failed.judgement is None and failed.error == "RuntimeError: kernel exploded"
    assert measured.judgement is not None
    assert [j.symbol for j in cache.load().values()] == [good.symbol]


def test_a_full_judge_measures_again_what_a_quick_one_measured(cache: JudgeCache, tiny) -> None:
    b = _pick(default_registry(), op="Contiguize")
    cpu, fp = executor(Backend.Cpu), cpu_fingerprint()
    quick, full = Judge(cpu, fp, cache, quick=True, budget=tiny), Judge(cpu, fp, cache, budget=tiny)
    assert quick.judge([b])[0].judgement.quick and not quick.judge([b])[0].measured
    first_full = full.judge([b])[0]
    assert first_full.measured and not first_full.judgement.quick
    assert not full.judge([b])[0].measured and not quick.judge([b])[0].measured


def test_judge_skips_other_backends_and_unknown_op_kinds(cache: JudgeCache, tiny) -> None:
    vulkan_only = [b for b in default_registry().bindings() if b.backend is Backend.Vulkan][:3]
    assert Judge(executor(Backend.Cpu), cpu_fingerprint(), cache, budget=tiny).judge(vulkan_only) == []


@pytest.mark.skipif(Backend.Vulkan not in available_backends(), reason="no Vulkan device here")
def test_judge_measures_a_vulkan_binding_on_the_device(cache: JudgeCache, tiny) -> None:
    b = _pick(default_registry(), op="Contiguize", backend="Vulkan")
    fingerprint = device_fingerprint(Backend.Vulkan)
    assert "driver" in fingerprint and "pipeline cache" in fingerprint
    (v,) = Judge(executor(Backend.Vulkan), fingerprint, cache, budget=tiny).judge([b])
    assert v.measured and v.judgement.device_fingerprint == fingerprint
    assert_timed_and_fitted(v.judgement)


@pytest.mark.skipif(Backend.Vulkan not in available_backends(), reason="no Vulkan device here")
def test_strided_read_kernels_are_judged_on_a_transposed_source(cache: JudgeCache, tiny) -> None:
    registry = default_registry()
    for op in ("IndexSelect", "Gather"):
        strided = next(b for b in registry.bindings() if b.op_kind.name == op and b.dtypes[0] is DType.F32
                       and b.kernel_source == "lazyfuel-glsl-strided")
        plain = next(b for b in registry.bindings() if b.op_kind.name == op and b.dtypes[0] is DType.F32
                     and b.kernel_source == "vulkan-slang")
        source = ladder_workload(strided, 4096, np.random.default_rng(0)).program.input_layouts[0]
        assert source.is_strided and source.strides == (1, source.shape[0])
        assert ladder_workload(plain, 4096, np.random.default_rng(0)).program.input_layouts[0].is_contiguous
    judge = Judge(executor(Backend.Vulkan), device_fingerprint(Backend.Vulkan), cache, budget=tiny)
    (v,) = judge.judge([strided])
    assert v.measured and v.judgement.kernel_source == "lazyfuel-glsl-strided"
    assert_timed_and_fitted(v.judgement)


@pytest.mark.skipif(Backend.Vulkan not in available_backends(), reason="no Vulkan device here")
def test_both_contiguize_bindings_are_judged_on_the_same_dense_offset_view(cache: JudgeCache, tiny) -> None:
    """At each rung the buffer copy and the copy shader time the same dense view at a start offset;
    the shader, which also reads strided views, times a transposed one too (the slower is kept)."""
    registry = default_registry()
    copy, shader = (next(b for b in registry.bindings() if b.op_kind is OpKind.Contiguize
                         and b.backend is Backend.Vulkan and b.dtypes[0] is DType.F32
                         and b.kernel_source == source) for source in ("vulkan-copy-buffer", "lazyfuel-glsl"))
    (copy_dense,) = ladder_workloads(copy, 4096, np.random.default_rng(0))
    shader_dense, shader_transposed = ladder_workloads(shader, 4096, np.random.default_rng(0))
    for w in (copy_dense, shader_dense):
        (step,) = w.program.steps
        assert step.param == {"shape": (64, 64), "strides": (64, 1), "offset": 64}  # rows 1.. of 65
        assert w.inputs[0].shape == (65, 64) and w.bytes_moved == 2 * 4096 * 4
    assert copy_dense.inputs[0].tobytes() == shader_dense.inputs[0].tobytes()  # same seed, same data
    assert Layout(**shader_transposed.program.steps[0].param).is_strided
    assert shader_transposed.bytes_moved == shader_dense.bytes_moved
    judge = Judge(executor(Backend.Vulkan), device_fingerprint(Backend.Vulkan), cache, budget=tiny)
    verdicts = judge.judge([copy, shader])
    assert [v.judgement.kernel_source for v in verdicts] == ["vulkan-copy-buffer", "lazyfuel-glsl"]
    assert all(v.measured and v.judgement.bytes_per_s > 0 for v in verdicts)  # inf where flat
    for v in verdicts:
        assert_timed_and_fitted(v.judgement)


def test_fft_ladders_transform_rows_and_reread_their_input() -> None:
    b = _pick(default_registry(), op="Irfft", dtype="C64")
    one = ladder_workload(b, 1 << 14, np.random.default_rng(0))
    (source,) = one.inputs
    assert source.shape == (4, 2049) and np.isfinite(source).all()
    assert one.program.steps[0].out_shape == (4, 4096) and one.n == 1 << 14
    four = ladder_workload(b, 256, np.random.default_rng(0), steps=4)
    assert [s.args for s in four.program.steps] == [(0,)] * 4  # irfft's output cannot feed irfft
    (out,) = executor(Backend.Cpu).run(four.program, list(four.inputs))
    assert out.dtype == np.float32 and out.shape == (1, 256)


def test_judge_measures_a_cpu_fft_binding(cache: JudgeCache, tiny) -> None:
    b = _pick(default_registry(), op="Rfft", dtype="F64")
    (v,) = Judge(executor(Backend.Cpu), cpu_fingerprint(), cache, budget=tiny).judge([b])
    assert v.measured and v.judgement.symbol == "lazyfuel::cpu::rfft_f64"
    assert [p.n for p in v.judgement.points] == [129, 2049]  # one 256- and one 4096-point signal
    assert [j.symbol for j in cache.load().values()] == [b.symbol]


@pytest.mark.skipif(Backend.OpenCL not in available_backends(), reason="no OpenCL device here")
def test_judge_measures_an_opencl_fft_and_the_planner_uses_it(cache: JudgeCache, tiny) -> None:
    b = _pick(default_registry(), op="Rfft", dtype="F32", backend="OpenCL")
    fingerprint = device_fingerprint(Backend.OpenCL)
    assert fingerprint.startswith("OpenCL | ") and "driver" in fingerprint
    (v,) = Judge(executor(Backend.OpenCL), fingerprint, cache, budget=tiny).judge([b])
    assert v.measured and v.judgement.device_fingerprint == fingerprint
    assert_timed_and_fitted(v.judgement)
    costs = measured_costs(backends=[Backend.OpenCL])
    assert costs.judgement(b) == v.judgement
    node = OpNode("Rfft", (0,), (("axis", -1), ("n", None), ("norm", None)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnmeasuredCostWarning)  # measured: no fallback to the priors
        program = Planner(default_registry(), [Backend.OpenCL], costs=costs).plan(
            Chain(1, (node,), (1,)), [DType.F32], [Layout.contiguous((64, 4096))])
    (step,) = program.steps
    assert step.binding == b
    assert step.cost == pytest.approx(costs.cost_fn(b)(dict(step.params, dtype_bytes=4, n=64 * 2049)))
