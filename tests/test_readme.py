"""README: the support table is the one the registry generates now."""

from __future__ import annotations

from pathlib import Path

from lazyfuel.support import BEGIN, END, support_table

README = Path(__file__).parents[1] / "README.md"


def test_readme_support_table_is_current() -> None:
    text = README.read_text(encoding="utf-8")
    current = text[text.index(BEGIN) + len(BEGIN):text.index(END)].strip()
    assert current == support_table(), "regenerate it: python -m lazyfuel.support README.md"


def test_readme_opens_with_the_two_commands() -> None:
    head = README.read_text(encoding="utf-8").split("## ")[0]
    assert "make demo" in head and "make test" in head
