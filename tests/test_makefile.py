"""The Makefile's install steps, run by the real make on a copy of it: what a fresh Debian machine
needs is in the apt list, a failed venv step leaves nothing half made, and a second run installs
nothing. A stand-in Python takes the place of python3 (its venv's pip logs what it is asked and
fails on demand), so no network is needed and the apt step is given an empty package list."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# What `make demo` needs on a Debian 12 root that has only git and make (issue 15).
FRESH_MACHINE_NEEDS = {"python3", "python3-venv", "python3-dev", "g++", "libvulkan1", "mesa-vulkan-drivers",
                       "vulkan-validationlayers", "glslc", "spirv-tools", "pocl-opencl-icd",
                       "ocl-icd-opencl-dev"}

FAKE_PYTHON = """#!/bin/sh
# python3 -m venv DIR: a venv whose python logs its arguments; `pip install` fails while FAIL exists
[ "$1 $2" = "-m venv" ] || exit 2
mkdir -p "$3/bin"
cat > "$3/bin/python" <<'EOF'
#!/bin/sh
echo "$*" >> "$(dirname "$0")/../../calls.log"
case "$*" in *"pip install"*) [ ! -e "$(dirname "$0")/../../FAIL" ] || exit 1 ;; esac
exit 0
EOF
chmod +x "$3/bin/python"
"""

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copy(REPO / "Makefile", tmp_path / "Makefile")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    fake = tmp_path / "fake-python3"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    return tmp_path


def _make(project: Path, *targets: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "--no-print-directory", f"PY={project / 'fake-python3'}", "APT_PACKAGES=",
                           *targets], cwd=project, capture_output=True, text=True, timeout=60)


def _calls(project: Path) -> list[str]:
    log = project / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def test_apt_list_has_everything_a_bare_debian_needs() -> None:
    database = subprocess.run(["make", "-pn", "-f", str(REPO / "Makefile"), "--no-print-directory", "clean"],
                              cwd=REPO, capture_output=True, text=True, timeout=60).stdout
    (line,) = [x for x in database.splitlines() if x.startswith("APT_PACKAGES :=")]
    assert FRESH_MACHINE_NEEDS <= set(line.split(":=", 1)[1].split())


def test_half_made_venv_is_removed_and_made_again(project: Path) -> None:
    """A venv left with a python but no working pip (python3-venv was missing) is made again,
    instead of the next run dying on `.venv/bin/pip: No such file or directory`."""
    broken = project / ".venv" / "bin"
    broken.mkdir(parents=True)
    (broken / "python").write_text("#!/bin/sh\nexit 1\n")
    (broken / "python").chmod(0o755)
    done = _make(project, "venv")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (project / ".venv" / ".installed").exists()
    assert any("pip install" in c and ".[test]" in c for c in _calls(project))


def test_failed_venv_creation_leaves_no_venv(project: Path) -> None:
    failing = project / "failing-python3"
    failing.write_text("#!/bin/sh\nmkdir -p .venv/bin && touch .venv/bin/python && exit 1\n")
    failing.chmod(0o755)
    done = subprocess.run(["make", f"PY={failing}", "APT_PACKAGES=", "venv"], cwd=project,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert not (project / ".venv").exists()


def test_failed_install_leaves_no_stamp_and_is_redone(project: Path) -> None:
    (project / "FAIL").touch()
    assert _make(project, "venv").returncode != 0
    assert not (project / ".venv" / ".installed").exists()
    (project / "FAIL").unlink()
    (project / "calls.log").unlink()
    done = _make(project, "venv")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (project / ".venv" / ".installed").exists()
    assert any("pip install" in c and ".[test]" in c for c in _calls(project))


def test_second_run_installs_nothing(project: Path) -> None:
    assert _make(project, "venv").returncode == 0
    (project / "calls.log").unlink()
    again = _make(project, "venv")
    assert again.returncode == 0
    assert _calls(project) == []
    assert "pip" not in again.stdout
