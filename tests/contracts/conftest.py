"""Fixtures shared by the contract tests: the reference (seed) document and a small document."""

from __future__ import annotations

from pathlib import Path

import pytest
from reference_document import SEED

HERE = Path(__file__).parent
REPO = HERE.parents[1]
SMALL = HERE / "data" / "small_flat.md"
SHIPPED = sorted((REPO / "lazyfuel" / "contracts").glob("*.md"))


@pytest.fixture
def seed_path() -> Path:
    """The reference document, flattened, byte for byte as the project was given it."""
    return SEED


@pytest.fixture
def seed_text(seed_path: Path) -> str:
    return seed_path.read_text(encoding="utf-8")


@pytest.fixture
def small_text() -> str:
    """A small valid flattened one-kernel document (the base of the malformed corpus)."""
    return SMALL.read_text(encoding="utf-8")
