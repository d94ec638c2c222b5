"""Shared fixtures of the pipeline tests: graphs copied out of the repository, backends."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GRAPHS = REPO / "graphs"
MALFORMED = Path(__file__).resolve().parent / "malformed"


@pytest.fixture
def graphs(tmp_path: Path) -> Path:
    """A copy of graphs/ in a temporary folder, so the data and outputs the graphs write (under
    `../data`) land in tmp_path/data, never in the repository."""
    return Path(shutil.copytree(GRAPHS, tmp_path / "graphs"))


def write_graph(folder: Path, text: str, name: str = "g.yaml") -> Path:
    """`text` written as a graph file in `folder`; its path."""
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path
