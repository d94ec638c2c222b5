"""The shell tools in tools/: they parse, and refuse bad arguments with a message saying what is
accepted (their real runs need root and network: tools/fresh-machine.sh is run by hand and its
output kept in the report; tools/check-wheel.sh likewise)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[1] / "tools"
SCRIPTS = sorted(TOOLS.glob("*.sh"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_tool_parses(script: Path) -> None:
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


def test_fresh_machine_refuses_a_bad_pass_naming_the_choices() -> None:
    done = subprocess.run(["bash", str(TOOLS / "fresh-machine.sh"), "--pass", "admin"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert "root, user or both" in done.stderr and "'admin'" in done.stderr


def test_fresh_machine_help_lists_its_options() -> None:
    done = subprocess.run(["bash", str(TOOLS / "fresh-machine.sh"), "--help"], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0
    for option in ("--pass", "--work", "--mirror", "--reuse-base", "--keep", "--no-host-ca"):
        assert option in done.stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_fresh_machine_refuses_a_path_that_is_not_a_repository(tmp_path: Path) -> None:
    done = subprocess.run(["bash", str(TOOLS / "fresh-machine.sh"), str(tmp_path)], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 2
    assert "not a git repository" in done.stderr or "must run as root" in done.stderr
