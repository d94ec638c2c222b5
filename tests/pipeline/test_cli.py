"""`lazyfuel run`, `explain` and `bench` through `lazyfuel.cli.main`: exit codes (0 ok, 1 failure,
2 usage), one-line errors unless --debug, the run summary, schedulers, and the bench plot."""

from __future__ import annotations

from pathlib import Path

import pytest

import lazyfuel as lf
from lazyfuel.backends.base import executor
from lazyfuel.backends.vulkan import get_pool
from lazyfuel.cli import main
from lazyfuel.contracts.model import Backend
from lazyfuel.pipeline import GraphError, build, execute, load_graph
from lazyfuel.providers import available_backends

from .conftest import MALFORMED, write_graph

SMALL = """
inputs:
  table: {random: {shape: [1000, 16], chunks: [250, 16], seed: 0}}
  ids: {indices: {shape: [300], high: 1000, seed: 1, chunks: 100}}
steps:
  - {name: rows, op: index_select, x: table, dim: 0, indices: ids}
outputs:
  - rows
"""
# The second select's indices reach 29 along an axis of 20: only it is out of range.
TWO_SELECTS = """
inputs:
  table: {random: {shape: [100, 8], chunks: [50, 8], seed: 0}}
  ok: {indices: {shape: [20], high: 100, seed: 1, chunks: 10}}
  bad: {indices: {shape: [20, 8], high: 30, seed: 2, chunks: [10, 8]}}
steps:
  - {name: picked, op: index_select, x: table, dim: 0, indices: ok}
  - {name: shuffled, op: gather, x: picked, dim: 0, indices: bad}
outputs:
  - shuffled
"""


def test_run_prints_outputs_and_the_summary(graphs: Path, capsys: pytest.CaptureFixture,
                                            monkeypatch: pytest.MonkeyPatch):
    with lf.config(_progress_after_s=0):  # a bar however fast the run is
        assert main(["run", str(graphs / "quickstart.yaml")]) == 0
    out, err = capsys.readouterr()
    assert "dropped: shape (128, 32768) float32 (16.0 MiB) sha256 " in out
    assert f"ran {graphs / 'quickstart.yaml'} in " in out and "(scheduler threads)" in out
    assert " GB/s" in out and "bindings " in out and "IndexSelect" in out
    assert "peak memory growth" in out
    assert "100% Completed" in err  # the progress bar goes to stderr


def test_run_writes_a_missing_store_then_reuses_it(graphs: Path, capsys: pytest.CaptureFixture):
    args = ["run", str(graphs / "out_of_core.yaml"), "--set", "rows=65536", "--no-progress"]
    assert main(args) == 0
    assert "writing " in capsys.readouterr().err
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert "writing " not in err and "features: shape (65536, 32) float32" in out


def test_set_overrides_a_param(tmp_path: Path, capsys: pytest.CaptureFixture):
    text = SMALL.replace("[300]", "[$n]").replace("inputs:", "params: {n: 300}\ninputs:")
    path = write_graph(tmp_path, text)
    assert main(["run", str(path), "--set", "n=7", "--no-progress"]) == 0
    assert "rows: shape (7, 16)" in capsys.readouterr().out


@pytest.mark.parametrize("scheduler", ["sync", "processes"])
def test_local_schedulers_give_the_same_checksum(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                 scheduler: str):
    path = write_graph(tmp_path, SMALL)
    assert main(["run", str(path), "--no-progress"]) == 0
    threads = capsys.readouterr().out.splitlines()[0]
    assert main(["run", str(path), "--no-progress", "--scheduler", scheduler]) == 0
    assert capsys.readouterr().out.splitlines()[0] == threads


def test_a_distributed_scheduler_address(tmp_path: Path, capsys: pytest.CaptureFixture):
    distributed = pytest.importorskip("distributed")
    path = write_graph(tmp_path, SMALL)
    assert main(["run", str(path), "--no-progress", "--scheduler", "sync"]) == 0
    want = capsys.readouterr().out.splitlines()[0]
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=":0") as cluster:
        assert main(["run", str(path), "--scheduler", cluster.scheduler_address]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == want and f"(scheduler {cluster.scheduler_address})" in out


def _ran_on(out: str) -> str:
    (line,) = [line for line in out.splitlines() if line.startswith("ran on")]
    return line


def test_the_summary_says_where_the_programs_ran_on_the_cpu(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                            monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("LAZYFUEL_BACKEND", "auto")
    path = write_graph(tmp_path, SMALL)
    assert main(["run", str(path), "--no-progress", "--backend", "cpu"]) == 0
    out = capsys.readouterr().out
    assert _ran_on(out) == "ran on (lf.profile): 3 program(s) on the CPU (numpy)" and "Cpu)" in out


@pytest.mark.skipif(Backend.Vulkan not in available_backends("auto"), reason="no Vulkan device here")
def test_the_summary_names_the_vulkan_device_the_programs_ran_on(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture,
                                                                 monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("LAZYFUEL_BACKEND", "auto")
    path = write_graph(tmp_path, SMALL)
    assert main(["run", str(path), "--no-progress", "--backend", "vulkan"]) == 0
    want = f"ran on (lf.profile): 3 program(s) on Vulkan {get_pool().label}"
    assert _ran_on(capsys.readouterr().out) == want


@pytest.mark.skipif(Backend.OpenCL not in available_backends("auto"), reason="no OpenCL device here")
def test_the_summary_names_the_fft_device(tmp_path: Path, capsys: pytest.CaptureFixture,
                                          monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("LAZYFUEL_BACKEND", "auto")
    path = write_graph(tmp_path, "inputs:\n  a: {random: {shape: [8, 64], chunks: [4, 64]}}\n"
                       "steps:\n  - {name: s, op: rfft, x: a}\noutputs: [s]\n")
    assert main(["run", str(path), "--no-progress", "--backend", "opencl"]) == 0
    name = executor(Backend.OpenCL).device.name
    assert _ran_on(capsys.readouterr().out) == f"ran on (lf.profile): 2 program(s) on OpenCL {name}"


def test_the_summary_of_a_processes_run_says_where_it_was_planned(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture,
                                                                  monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("LAZYFUEL_BACKEND", "auto")
    path = write_graph(tmp_path, SMALL)
    assert main(["run", str(path), "--no-progress", "--backend", "cpu", "--scheduler", "processes"]) == 0
    assert _ran_on(capsys.readouterr().out) == (
        "ran on Cpu as planned (lf.profile counted no program in this process: the processes scheduler "
        "ran them elsewhere)")


def test_an_index_out_of_range_names_the_file_the_step_and_the_indices(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture):
    path = write_graph(tmp_path, TWO_SELECTS)
    assert main(["run", str(path), "--no-progress"]) == 1
    out, err = capsys.readouterr()
    (line,) = [line for line in err.splitlines() if not line.startswith("lazyfuel: warning: ")]
    assert out == "" and line.startswith(f"lazyfuel: {path}:8: step 'shuffled', indices 'bad': index ")
    assert line.endswith(" is out of range; expected 0 <= index < 20")


def test_the_run_raises_an_index_error_located_in_the_graph(tmp_path: Path):
    built = build(load_graph(write_graph(tmp_path, TWO_SELECTS)))
    with pytest.raises(IndexError, match="is out of range") as caught:
        execute(built, progress=False)
    assert isinstance(caught.value, GraphError)
    assert (caught.value.line, caught.value.step) == (8, "shuffled")
    one = write_graph(tmp_path, SMALL.replace("high: 1000", "high: 2000"), "one.yaml")
    with pytest.raises(GraphError, match=r"one.yaml:6: step 'rows', indices 'ids': index \d+ at position"):
        execute(build(load_graph(one)), progress=False)


def test_a_binary_file_as_a_graph_is_a_graph_error(tmp_path: Path, capsys: pytest.CaptureFixture):
    path = tmp_path / "picture.yaml"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe")
    with pytest.raises(GraphError, match=r"picture.yaml: not a text file: byte 0x89 at offset 0 is not "):
        load_graph(path)
    assert main(["run", str(path)]) == 1
    assert capsys.readouterr().err.startswith(f"lazyfuel: {path}: not a text file: ")


def test_a_malformed_graph_is_one_line_and_exit_1(capsys: pytest.CaptureFixture):
    path = MALFORMED / "unknown_op.yaml"
    assert main(["run", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (f"lazyfuel: {path}:9: step 'rows': unknown op 'gathr'; expected one of "
                   f"{err.split('expected one of ')[1].split(' (')[0]} (did you mean 'gather'?)\n")
    assert err.count("\n") == 1


def test_debug_shows_the_exception(capsys: pytest.CaptureFixture):
    with pytest.raises(GraphError):
        main(["--debug", "explain", str(MALFORMED / "unknown_op.yaml")])


def test_a_missing_graph_is_exit_1(capsys: pytest.CaptureFixture):
    assert main(["run", "no/such/graph.yaml"]) == 1
    err = capsys.readouterr().err
    assert err == "lazyfuel: no/such/graph.yaml: cannot read the graph: No such file or directory\n"


def test_explain_plans_without_running_or_writing(graphs: Path, capsys: pytest.CaptureFixture):
    assert main(["explain", str(graphs / "out_of_core.yaml")]) == 0
    out = capsys.readouterr().out
    assert "## output 'features' (zarr -> " in out and "lazyfuel plan:" in out and "Gather" in out
    assert "costs compared (" in out and "    backend: " in out and "Gather (chain node " in out
    assert "is not written yet" in out
    assert not (graphs.parent / "data").exists()


@pytest.mark.parametrize("argv", [
    ["run"],
    ["run", "g.yaml", "--scheduler", "bogus"],
    ["run", "g.yaml", "--set", "novalue"],
    ["run", "g.yaml", "--backend", "metal"],
    ["bench", "--sizes", "ten"],
    ["explain"],
])
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture):
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2
    assert "usage: lazyfuel" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["run", "explain", "bench"])
def test_help(command: str, capsys: pytest.CaptureFixture):
    with pytest.raises(SystemExit) as caught:
        main([command, "--help"])
    assert caught.value.code == 0
    out = capsys.readouterr().out
    assert f"usage: lazyfuel {command}" in out and "--device" in out and "--backend" in out


def test_bench_quick_writes_a_png(tmp_path: Path, capsys: pytest.CaptureFixture):
    out_png = tmp_path / "bench.png"
    assert main(["bench", "--quick", "--out", str(out_png)]) == 0
    out = capsys.readouterr().out
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out_png.stat().st_size > 20_000
    rows = [line for line in out.splitlines() if "MiB" in line]
    assert len(rows) == 4 * 2 * 3  # ops x sizes x implementations
    assert {"numpy", "dask", "lazyfuel"} <= {r.split()[3] for r in rows}
