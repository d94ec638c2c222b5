"""Safe composition and strict node reading."""

from __future__ import annotations

import time

import pytest
import yaml

from lazyfuel.contracts.model import ContractError
from lazyfuel.contracts.nodes import Section, compose, describe, unknown_key_message


def test_compose_reports_document_lines() -> None:
    with pytest.raises(ContractError) as info:
        compose("a: 1\nb: [1, 2\nc: 3", "doc.md", 10)
    assert info.value.path == "doc.md"
    assert info.value.line in (11, 12)
    assert info.value.reason.startswith("YAML syntax error")


def test_compose_refuses_anchors_and_aliases_before_composing() -> None:
    bomb = "a: &a [1, 2]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b, *b, *b, *b, *b, *b]"
    start = time.perf_counter()
    with pytest.raises(ContractError, match="anchors and aliases") as info:
        compose(bomb, "doc.md", 5)
    assert (info.value.line, info.value.key) == (5, "a")
    assert time.perf_counter() - start < 10.0  # catches blow-ups, not speed


@pytest.mark.parametrize(
    "text",
    ["a: !!python/object/apply:os.system ['true']", "a: !!python/name:os.system", "a: !custom 1",
     "a: !!binary aGk=", "a: !!set {x}", "a: !!timestamp 2001-12-14"],
)
def test_compose_refuses_foreign_tags(text: str) -> None:
    with pytest.raises(ContractError, match=r"YAML tag .* is not accepted"):
        compose(text, "doc.md", 1)


def test_compose_refuses_non_printable_characters_and_unicode_line_breaks() -> None:
    for ch in ("\x00", "\x1b", "\x85", "\u2028", "\ud800"):
        with pytest.raises(ContractError, match=f"U\\+{ord(ch):04X}") as info:
            compose(f"a: 1\nb: x{ch}y", "doc.md", 3)
        assert (info.value.line, info.value.key) == (4, "b")


def test_scalars_are_read_from_text_by_tag() -> None:
    sec = Section("doc.md", 1)
    node = compose("s: text\ni: 12\nf: 1.5\nb: true\nn:\nq: '12'\nd: 2001-12-14", "doc.md", 1)
    entries = sec.free_mapping(node, "doc", "doc")
    values = {k: sec.scalar(v, k) for k, (_, v) in entries.items.items()}
    assert values == {"s": "text", "i": 12, "f": 1.5, "b": True, "n": None, "q": "12", "d": "2001-12-14"}


def test_typed_readers_say_what_they_expected() -> None:
    sec = Section("doc.md", 1)
    node = compose("i: 1.5\nb: yes please\ns: 12\nl: [1]\nneg: -3", "doc.md", 1)
    entries = sec.free_mapping(node, "doc", "doc")
    with pytest.raises(ContractError, match=r"i must be an integer, got float '1\.5'"):
        sec.integer(entries.pop("i"), "i")
    with pytest.raises(ContractError, match="b must be true or false"):
        sec.boolean(entries.pop("b"), "b")
    with pytest.raises(ContractError, match="s must be a string, got int 12; quote it"):
        sec.string(entries.pop("s"), "s")
    with pytest.raises(ContractError, match="l must be a single value, got a list"):
        sec.scalar(entries.pop("l"), "l")
    with pytest.raises(ContractError, match="neg must be >= 0, got -3"):
        sec.integer(entries.pop("neg"), "neg")


def test_mapping_refuses_duplicates_unknowns_and_leftovers() -> None:
    sec = Section("doc.md", 20)
    with pytest.raises(ContractError, match="duplicate key 'a' in doc \\(first on line 20\\)") as info:
        sec.mapping(compose("a: 1\nb: 2\na: 3", "doc.md", 20), "doc", "doc", ("a", "b"))
    assert (info.value.line, info.value.key) == (22, "a")
    with pytest.raises(ContractError, match="unknown key 'c' in doc; allowed keys here: a, b"):
        sec.mapping(compose("a: 1\nc: 2", "doc.md", 20), "doc", "doc", ("a", "b"))
    entries = sec.mapping(compose("a: 1\nb: 2", "doc.md", 20), "doc", "doc", ("a", "b"))
    entries.pop("a")
    with pytest.raises(ContractError, match="leftover"):
        entries.done()
    with pytest.raises(ContractError, match="missing key 'z' in doc") as info:
        entries.pop("z")
    assert info.value.line == 20


def test_non_string_keys_are_refused() -> None:
    sec = Section("doc.md", 1)
    with pytest.raises(ContractError, match="keys in doc must be plain names"):
        sec.free_mapping(compose("1: a", "doc.md", 1), "doc", "doc")
    with pytest.raises(ContractError, match="keys in doc must be plain names"):
        sec.free_mapping(compose("[a]: b", "doc.md", 1), "doc", "doc")


def test_unknown_key_message_suggests_a_close_key() -> None:
    assert unknown_key_message("acept", "the block", ("accept", "kernel")) == (
        "unknown key 'acept' in the block (did you mean 'accept'?); allowed keys here: accept, kernel")


def test_describe() -> None:
    node = yaml.compose("a: [1]\nb: {c: 1}\nd:\ne: 5", Loader=yaml.SafeLoader)
    described = [describe(v) for _, v in node.value]
    assert described == ["a list", "a mapping", "nothing (an empty value)", "int '5'"]
