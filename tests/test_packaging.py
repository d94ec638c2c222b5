"""Packaging: a wheel built from the repository carries every file the package reads at run time."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "lazyfuel"


def _package_data_globs() -> list[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return config["tool"]["setuptools"]["package-data"]["lazyfuel"]


def test_package_data_covers_every_non_python_file() -> None:
    """A data file no glob names is left out of the wheel, and an installed lazyfuel then fails to
    find it (contracts and SPIR-V are read from the package's own directory)."""
    globs = _package_data_globs()
    data = [p.relative_to(PACKAGE) for p in PACKAGE.rglob("*")
            if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts]
    assert data, "expected the contract documents and the SPIR-V under lazyfuel/"
    missed = [str(p) for p in data if not any(p.match(g) for g in globs)]
    assert not missed, f"not in [tool.setuptools.package-data] lazyfuel = {globs}: {missed}"



OUTSIDE = ("../" + "shared", "DESIGN" + ".md", "STYLE" + ".md")  # spelled apart: this file names none


def test_no_tracked_file_points_at_documents_outside_the_repository():
    # a user's clone has no shared folder beside it: only CI and the fresh-machine tools may name it
    import subprocess

    root = Path(__file__).resolve().parents[1]
    names = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout
    pointing = [name for name in names.splitlines()
                if not name.startswith((".ci/", "tools/")) and (root / name).is_file()
                and any(o in (root / name).read_text(encoding="utf-8", errors="replace") for o in OUTSIDE)]
    assert pointing == []
