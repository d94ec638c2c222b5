"""`lazyfuel.cli`: the parser holds every command family, errors end as one line with the exit
code the module documents (1 failed work, 2 bad usage), --debug raises them instead, and a stdout
whose reader went away is told from one that is merely not a terminal. (The end-to-end manners,
through a real `python -m lazyfuel` process, are tests/test_command_line.py's.)"""

from __future__ import annotations

import argparse
import io
import os
from pathlib import Path

import pytest

from lazyfuel import cli
from lazyfuel.pipeline import GraphError

MISSING = "no/such/graph.yaml"


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_the_parser_holds_every_command_and_contracts_its_actions():
    commands = _commands(cli.build_parser())
    assert list(commands) == ["devices", "contracts", "judge", "audit", "run", "explain", "bench"]
    assert list(_commands(commands["contracts"])) == ["check", "list", "show", "fmt"]


def test_every_command_takes_debug_and_leaves_it_off_unless_given():
    parser = cli.build_parser()
    assert parser.parse_args(["devices"]).debug is False
    assert parser.parse_args(["devices", "--debug"]).debug is True
    assert parser.parse_args(["contracts", "fmt", "a.md", "--debug"]).debug is True


def test_failed_work_is_one_line_and_exit_1(capsys):
    assert cli.main(["explain", MISSING]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("lazyfuel: ") and err.count("\n") == 1
    assert err == f"lazyfuel: {MISSING}: cannot read the graph: No such file or directory\n"


def test_debug_raises_the_error_itself():
    with pytest.raises(GraphError, match="cannot read the graph"):
        cli.main(["explain", MISSING, "--debug"])


def test_bad_usage_is_exit_2(capsys, vulkan):
    assert cli.main(["explain", MISSING, "--device", "no such gpu"]) == 2
    assert capsys.readouterr().err.startswith("lazyfuel: --device='no such gpu' matches no Vulkan device")


def test_a_failed_call_reraises_with_debug_and_prints_without(capsys):
    err = ValueError("bad value")
    assert cli._failed(err, debug=False) == 1 and capsys.readouterr().err == "lazyfuel: bad value\n"
    with pytest.raises(ValueError, match="bad value"):
        cli._failed(err, debug=True)


def test_a_pipe_whose_reader_closed_is_gone_and_an_open_one_a_file_or_a_capture_are_not(tmp_path: Path):
    read, write = os.pipe()
    with os.fdopen(write, "w") as stream:
        assert not cli._reader_gone(stream)
        os.close(read)
        assert cli._reader_gone(stream)
    with open(tmp_path / "out.txt", "w") as stream:
        assert not cli._reader_gone(stream)
    assert not cli._reader_gone(io.StringIO())


def test_broken_pipe_exit_code_is_a_shells_for_sigpipe():
    assert cli.EXIT_BROKEN_PIPE == 141
