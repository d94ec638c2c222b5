"""The reference document kept in the repository is the one the project was given, byte for byte."""

from __future__ import annotations

import hashlib

from reference_document import SEED, SEED_SHA256

from lazyfuel.contracts import format_text, parse_contracts

from .conftest import REPO


def test_reference_document_is_pinned_byte_for_byte() -> None:
    assert hashlib.sha256(SEED.read_bytes()).hexdigest() == SEED_SHA256


def test_reference_document_is_inside_the_repository() -> None:
    assert SEED.is_relative_to(REPO.resolve())


def test_shipped_canonical_copy_holds_the_same_contracts() -> None:
    """The package ships the seed in canonical form; it must stay the same contracts."""
    shipped = REPO / "lazyfuel" / "contracts" / "vulkan_select.md"
    seed_text = SEED.read_text(encoding="utf-8")
    assert parse_contracts(shipped) == parse_contracts(format_text(seed_text))
