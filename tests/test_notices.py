"""Warnings that respect the reader: a backend that cannot run is mentioned once per process, only
where the work needs it, on one line; warnings have no source line; nothing lands inside the
progress bar; lf.explain and `lazyfuel explain` say a left-out backend once."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel import notices
from lazyfuel.api import DefaultRuntime
from lazyfuel.cli import main
from lazyfuel.contracts.model import Backend
from lazyfuel.dtypes import DType
from lazyfuel.graph.explain import explain_node
from lazyfuel.judge.costs import reset_warning
from lazyfuel.layout import Layout
from lazyfuel.pipeline.run import held_notices
from lazyfuel.planner import Chain, OpNode, Planner
from lazyfuel.planner.plan import left_out_notice
from lazyfuel.providers import available_backends, default_registry, unusable_reason

REPO = Path(__file__).resolve().parents[1]
WHY = "not usable here: the Cuda FFT back end needs CuPy"
RFFT = Chain(1, (OpNode("Rfft", (0,), (("axis", -1), ("n", None), ("norm", None))),), (1,))
SELECT = Chain(2, (OpNode("IndexSelect", (0, 1), (("dim", 0),)),), (2,))


@pytest.fixture
def cuda_left_out() -> Planner:
    """A planner over the usable backends that was told Cuda is left out, with its notice unsaid."""
    notices.forget(left_out_notice(Backend.Cuda))
    yield Planner(default_registry(), [b for b in available_backends() if b is not Backend.Cuda],
                  left_out={Backend.Cuda: WHY}, mention_left_out=True)
    notices.forget(left_out_notice(Backend.Cuda))


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "lazyfuel"]


def test_a_backend_that_cannot_run_is_mentioned_once_where_the_work_needs_it(cuda_left_out, caplog):
    caplog.set_level(logging.WARNING, logger="lazyfuel")
    cuda_left_out.plan(SELECT, [DType.F32, DType.U32], [Layout.contiguous((64, 8)), Layout.contiguous((5,))])
    assert _said(caplog) == []  # Cuda ships no IndexSelect: not a word about it
    for rows in (4, 8):
        cuda_left_out.plan(RFFT, [DType.F32], [Layout.contiguous((rows, 64))])
    assert _said(caplog) == [f"lazyfuel: Rfft planned without the Cuda backend, which is {WHY}"]


def test_a_forced_choice_is_not_mentioned(caplog):
    caplog.set_level(logging.WARNING, logger="lazyfuel")
    notices.forget(left_out_notice(Backend.Cuda))
    forced = {Backend.Cuda: "left out by LAZYFUEL_BACKEND=cpu"}
    planner = Planner(default_registry(), [Backend.Cpu], left_out=forced)
    planner.plan(RFFT, [DType.F32], [Layout.contiguous((4, 64))])
    assert _said(caplog) == []


def test_explain_names_a_left_out_backend_only_for_ops_it_ships_and_counts_as_the_mention(cuda_left_out,
                                                                                        caplog):
    caplog.set_level(logging.WARNING, logger="lazyfuel")
    runtime = DefaultRuntime()
    x = lf.from_array(np.ones((8, 64), np.float32), chunks=(4, 64))
    select = explain_node(x.index_select(0, np.arange(3))._node, runtime, cuda_left_out)
    assert "Cuda" not in select and not notices.given(left_out_notice(Backend.Cuda))
    fft = explain_node(lf.rfft(x)._node, runtime, cuda_left_out)
    assert f"  Cuda's bindings are not planned over: Cuda is {WHY}" in fft
    cuda_left_out.plan(RFFT, [DType.F32], [Layout.contiguous((2, 64))])  # computing it later
    assert _said(caplog) == []  # the explanation said it: no second mention


@pytest.mark.skipif(unusable_reason(Backend.Cuda) is None, reason="Cuda runs here")
def test_a_fresh_process_hears_of_cuda_only_with_an_fft_and_sees_one_line_warnings(tmp_path: Path):
    script = """
import sys
import numpy as np
import lazyfuel as lf
x = lf.from_array(np.ones((64, 32), np.float32), chunks=(16, 32))
y = x.index_select(0, np.arange(10))
y.compute()
print("--- fft", file=sys.stderr)
lf.rfft(x).compute()
lf.rfft(x[:8]).compute()
"""
    env = {**os.environ, "PYTHONPATH": str(REPO), "LAZYFUEL_CACHE_DIR": str(tmp_path),
           "LAZYFUEL_BACKEND": "auto"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    select, fft = done.stderr.split("--- fft\n")
    assert "Cuda" not in select
    # the one unmeasured-cost warning: a single line, no source line below it
    (unmeasured,) = select.splitlines()
    assert unmeasured.startswith("lazyfuel:0: UnmeasuredCostWarning: no judge measurement for ")
    (cuda,) = fft.splitlines()
    assert cuda == f"lazyfuel: Rfft planned without the Cuda backend, which is not usable here: " \
                   f"{unusable_reason(Backend.Cuda)}"


def test_held_notices_are_shown_after_the_block_in_order(caplog):
    caplog.set_level(logging.WARNING, logger="lazyfuel")
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        with held_notices():
            notices.LOGGER.warning("lazyfuel: first")
            warnings.warn("second", UserWarning, stacklevel=1)
            assert _said(caplog) == [] and shown == []  # nothing while a bar would be drawn
        assert [str(w.message) for w in shown] == ["second"]
    assert _said(caplog) == ["lazyfuel: first"]


def test_no_warning_lands_inside_the_progress_bar(tmp_path: Path, capsys, monkeypatch):
    """A run whose planning warns (no judge measurement in a fresh cache) while the bar is drawn."""
    from lazyfuel import api

    monkeypatch.setenv("LAZYFUEL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("LAZYFUEL_BACKEND", "auto")
    api._planner.cache_clear()  # a planner with no measurements: its first plan warns
    reset_warning()
    graph = tmp_path / "g.yaml"
    graph.write_text("inputs:\n  a: {random: {shape: [4000, 64], chunks: [500, 64]}}\n"
                     "  i: {indices: {shape: [3000], high: 4000, chunks: 300}}\n"
                     "steps:\n  - {name: b, op: index_select, x: a, dim: 0, indices: i}\noutputs: [b]\n")
    try:
        with lf.config(_progress_after_s=0):  # a bar however fast the run is
            assert main(["run", str(graph)]) == 0
    finally:
        api._planner.cache_clear()  # later tests plan with the session's own cache again
    lines = capsys.readouterr().err.split("\n")
    bar = [n for n, line in enumerate(lines) if "Completed" in line]
    warned = [n for n, line in enumerate(lines) if "lazyfuel: warning: no judge measurement" in line]
    assert bar and len(warned) == 1 and warned[0] > bar[-1]
    assert lines[warned[0]].startswith("lazyfuel: warning: ")  # its own line, after the bar's


def test_lazyfuel_explain_names_a_left_out_backend_once_for_all_outputs(tmp_path: Path, capsys):
    graph = tmp_path / "two.yaml"
    graph.write_text("inputs:\n  x: {random: {shape: [16, 64], chunks: [8, 64]}}\n"
                     "steps:\n  - {name: a, op: rfft, x: x}\n  - {name: b, op: fft, x: x}\n"
                     "outputs: [a, b]\n")
    assert main(["explain", str(graph), "--backend", "cpu"]) == 0
    out = capsys.readouterr().out
    assert out.count("Cuda's bindings are not planned over: Cuda is left out by LAZYFUEL_BACKEND=cpu") == 1
    assert out.count("lazyfuel plan: ") == 2
