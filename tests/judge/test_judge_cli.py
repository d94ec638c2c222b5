"""`lazyfuel judge`: measures, then reads the cache; what it stored reaches a planner."""

from __future__ import annotations

from lazyfuel.cli import main
from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.judge import JudgeCache
from lazyfuel.judged_costs import measured_costs
from lazyfuel.providers import default_registry


def test_judge_cli_measures_then_reads_the_cache(cache: JudgeCache, capsys) -> None:
    argv = ["judge", "--quick", "--backend", "cpu", "--op", "IndexSelect", "--dtype", "F32"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    # two bindings: U32 indices, and I64 ones (the kernel for axes past 2**32)
    assert "2 measured, 0 cached" in captured.out and str(cache.path) in captured.out
    assert "lazyfuel::cpu::index_select_f32" in captured.out and "GB/s" in captured.out
    assert "lazyfuel::cpu::index_select_wide_f32" in captured.out
    assert "judging 2 Cpu binding(s)" in captured.err and "2/2" in captured.err  # the progress bar
    assert main(argv) == 0
    assert "0 measured, 2 cached" in capsys.readouterr().out
    costs = measured_costs(backends=[Backend.Cpu])
    judged = [b for b in default_registry().bindings() if costs.judgement(b) is not None]
    assert {(b.op_kind, b.dtypes) for b in judged} == {
        (OpKind.IndexSelect, (DType.F32, index, DType.F32)) for index in (DType.U32, DType.I64)}


def test_judge_cli_measures_fft_bindings(cache: JudgeCache, capsys) -> None:
    assert main(["judge", "--quick", "--backend", "cpu", "--op", "Rfft", "--op", "Irfft"]) == 0
    out = capsys.readouterr().out
    assert "4 measured, 0 cached" in out
    assert "lazyfuel::cpu::rfft_f32" in out and "lazyfuel::cpu::irfft_c128" in out
