"""The command line's manners: a closed pipe ends it quietly, --debug is taken anywhere, --backend
takes what LAZYFUEL_BACKEND takes, and --device naming no device is a usage error listing them."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lazyfuel.cli import EXIT_BROKEN_PIPE, build_parser, main
from lazyfuel.contracts.model import Backend
from lazyfuel.pipeline import GraphError
from lazyfuel.providers import BACKEND_CHOICES, available_backends, unusable_reason

REPO = Path(__file__).resolve().parents[1]
MALFORMED = REPO / "tests" / "pipeline" / "malformed" / "unknown_op.yaml"


def _lazyfuel(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # this checkout's lazyfuel
    return subprocess.Popen([sys.executable, "-m", "lazyfuel", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_a_reader_that_goes_away_ends_the_command_quietly():
    """`lazyfuel contracts list FILE | head`: the reader closes the pipe before the table is written."""
    proc = _lazyfuel("contracts", "list", "lazyfuel/contracts/vulkan.md")
    proc.stdout.close()  # like head exiting before lazyfuel writes
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == EXIT_BROKEN_PIPE == 141
    assert err == ""  # no "lazyfuel: [Errno 32] Broken pipe", no "Exception ignored"


def test_a_reader_that_stays_gets_everything():
    proc = _lazyfuel("contracts", "list", "lazyfuel/contracts/vulkan.md")
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0 and out.decode().rstrip().endswith("binding(s)")


@pytest.mark.parametrize("argv", [
    ["explain", str(MALFORMED), "--debug"],
    ["--debug", "explain", str(MALFORMED)],
    ["run", "--debug", str(MALFORMED)],
])
def test_debug_is_taken_before_or_after_the_subcommand(argv: list[str]):
    with pytest.raises(GraphError):
        main(argv)


def test_debug_after_a_nested_subcommand(tmp_path: Path):
    with pytest.raises(FileNotFoundError):
        main(["contracts", "show", str(tmp_path / "missing.md"), "--debug"])
    assert main(["contracts", "show", str(tmp_path / "missing.md")]) == 1  # without it: one line


def _backend_choices(parser: argparse.ArgumentParser) -> dict[str, tuple[str, ...]]:
    """The choices of --backend of every subcommand that has it."""
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    found = {}
    for name, command in sub.choices.items():
        for action in command._actions:
            if "--backend" in action.option_strings:
                found[name] = tuple(action.choices)
    return found


def test_every_backend_option_takes_what_lazyfuel_backend_takes():
    choices = _backend_choices(build_parser())
    assert set(choices) == {"run", "explain", "bench", "judge", "audit"}
    assert set(choices.values()) == {BACKEND_CHOICES}
    assert set(BACKEND_CHOICES) == {"auto", "vulkan", "cuda", "opencl", "cpu"}
    for choice in BACKEND_CHOICES:  # each is a valid LAZYFUEL_BACKEND (usable here or not)
        try:
            available_backends(choice)
        except RuntimeError as err:
            assert "cannot run here" in str(err)
    with pytest.raises(ValueError, match="expected one of auto, vulkan, cuda, opencl, cpu"):
        available_backends("metal")


def test_run_accepts_every_backend_choice_and_any_case(tmp_path: Path):
    parser = build_parser()
    for choice in BACKEND_CHOICES:
        assert parser.parse_args(["run", "g.yaml", "--backend", choice.upper()]).backend_choice == choice


def test_a_device_that_is_not_there_is_a_usage_error_naming_those_that_are(
        capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("LAZYFUEL_DEVICE", raising=False)
    path = REPO / "graphs" / "quickstart.yaml"  # refused before it is read: nothing runs or is written
    assert main(["run", str(path), "--device", "99", "--no-progress"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("lazyfuel: --device='99' ")
    if unusable_reason(Backend.Vulkan) is None:
        assert "matches no Vulkan device; devices: [0] " in err
    assert "LAZYFUEL_DEVICE" not in os.environ  # nothing was set for a run that did not happen
