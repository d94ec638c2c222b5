"""`lazyfuel.commands.graphs`: the options of `run`, `explain` and `bench` (scheduler, NAME=VALUE
params, sizes in MiB, device and backend), each refused with what would be accepted, and
`explain` printing the graph's plans without running it."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from lazyfuel.commands.graphs import _assignment, _scheduler, _sizes, add_graph_commands
from lazyfuel.pipeline import explain, load_graph
from lazyfuel.providers import BACKEND_CHOICES

QUICKSTART = Path(__file__).resolve().parents[2] / "graphs" / "quickstart.yaml"


@pytest.mark.parametrize("text", ["threads", "processes", "sync", "tcp://127.0.0.1:8786", "inproc://x"])
def test_a_scheduler_is_a_local_one_or_an_address(text: str):
    assert _scheduler(text) == text


def test_another_scheduler_name_is_refused_naming_the_accepted_ones():
    with pytest.raises(argparse.ArgumentTypeError,
                       match=r"^'thread' is not threads, processes, sync or a scheduler address like tcp://"):
        _scheduler("thread")


@pytest.mark.parametrize(("text", "pair"), [("rows=100", ("rows", "100")), (" seed = 7 ", ("seed", "7")),
                                            ("path=a=b", ("path", "a=b")), ("empty=", ("empty", ""))])
def test_an_assignment_is_a_name_and_the_rest(text: str, pair: tuple[str, str]):
    assert _assignment(text) == pair


@pytest.mark.parametrize("text", ["rows", "=100", "  =1"])
def test_an_assignment_without_a_name_is_refused(text: str):
    with pytest.raises(argparse.ArgumentTypeError, match=rf"^{text!r} is not NAME=VALUE$"):
        _assignment(text)


def test_sizes_are_positive_mib_separated_by_commas():
    assert _sizes("1,2.5, 0.25,") == [1.0, 2.5, 0.25]
    with pytest.raises(argparse.ArgumentTypeError, match=r"^'1,x' is not a comma-separated list of MiB$"):
        _sizes("1,x")
    for text in ("0", "4,-1", ","):
        with pytest.raises(argparse.ArgumentTypeError, match=rf"^{text!r}: sizes must be positive MiB$"):
            _sizes(text)


def test_run_explain_and_bench_parse_their_options(parse):
    run = parse(add_graph_commands, "run", "g.yaml", "--set", "rows=3", "--set", "seed=1",
                "--scheduler", "sync", "--no-progress", "--device", "0", "--backend", "CPU")
    assert (run.graph, run.set, run.scheduler, run.no_progress, run.device, run.backend_choice) == (
        "g.yaml", [("rows", "3"), ("seed", "1")], "sync", True, "0", "cpu")
    plain = parse(add_graph_commands, "explain", "g.yaml")
    assert (plain.set, plain.device, plain.backend_choice) == (None, None, None)
    bench = parse(add_graph_commands, "bench", "--quick", "--op", "gather", "--op", "masked_fill",
                  "--sizes", "1,2", "--repeats", "2", "--out", "b.png")
    assert (bench.quick, bench.op, bench.sizes, bench.repeats, bench.out) == (
        True, ["gather", "masked_fill"], [1.0, 2.0], 2, "b.png")
    assert parse(add_graph_commands, "bench").out == "lazyfuel-bench.png"


def test_backend_takes_the_choices_and_nothing_else(parse, capsys):
    for choice in BACKEND_CHOICES:
        assert parse(add_graph_commands, "bench", "--backend", choice).backend_choice == choice
    with pytest.raises(SystemExit):
        parse(add_graph_commands, "bench", "--backend", "metal")
    assert "invalid choice: 'metal'" in capsys.readouterr().err


def test_explain_prints_the_graphs_plans(parse, capsys, monkeypatch):
    monkeypatch.setenv("LAZYFUEL_BACKEND", "cpu")
    args = parse(add_graph_commands, "explain", str(QUICKSTART), "--backend", "cpu")
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert out == explain(load_graph(str(QUICKSTART), {}))
    assert out.startswith("# quickstart")
