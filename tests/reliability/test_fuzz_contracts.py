"""Fuzzing the contract importer beyond tests/contracts/test_malformed.py.

That file mutates the reference document line by line and token by token, and refuses alias bombs
and deep nesting. Here the importer gets what those mutations do not make:
- raw bytes: random bytes, invalid UTF-8, UTF-16, NUL, through `parse_file` (and `parse_contracts`
  of a `bytes` object: a TypeError, as its signature says);
- one value of the canonical reference document replaced by a hostile one (huge and negative
  numbers, NaN and infinities, deep flow nesting, tabs, Unicode line separators, YAML tags), then
  parsed *and linked* into a fresh registry (`lf.load_contracts`), so the linking stage is fuzzed too;
- whole-document transformations that must not change the meaning: a BOM, CRLF or CR line ends
  give the same contracts; tabs for indentation are refused at their line;
- oversize documents are refused before YAML ever sees them (checked by construction: the YAML
  parser is replaced by one that fails the test).
Only `ContractError` (with the path, a line inside the document and a reason) may escape.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from reference_document import SEED

import lazyfuel as lf
from lazyfuel.contracts import ContractError, format_text, parse_contracts, parse_document
from lazyfuel.contracts import nodes as nodes_module
from lazyfuel.contracts.parse import MAX_CHARS, parse_file
from lazyfuel.providers import register_builtin_providers

from .fuzzing import fuzz


def _seed_text() -> str:
    return SEED.read_text(encoding="utf-8")


CANONICAL = format_text(_seed_text())
register_builtin_providers()  # the link registries the reference document names

HOSTILE = [
    "-1", "0", "-0", "1e400", "-1e400", ".nan", ".NaN", ".inf", "-.inf", "2147483648", "4294967296",
    "18446744073709551616", "9" * 5000, "0x7fffffff", "0o777", "0b101", "1_0", "1:30", "2026-11-29",
    "true", "false", "yes", "no", "on", "null", "~", "''", '""', "[]", "{}", "[" * 40 + "]" * 40,
    "{a: " * 40 + "1" + "}" * 40, "[U32, U32]", "[F31]", "[f32]", "[F32, F32]", "[]", "any", "-3", "2.5",
    "auto", "deadbeef", "'DEADBEEF'", "'0' ", "\t1", "1\t", "'\u2028'", '"\\u2028"', '"\\x00"', '"\\ud800"',
    '"\\U0010FFFF"', "é🙂", "!!str 5", "!!int x", "!!float nan", "!!python/name:os.system", "!!set {a}",
    "!!timestamp 2001-12-14", "!!binary aGk=", "&a 1", "*a", "passthrough(source", "passthrough(nothing)",
    "from_params()", "from_params(dim, dim)", "same_as(indices)", "same_as(out)", "\"2 ** 99999999\"",
    "\"__import__('os')\"", "\"n * 1e400\"", "\"1e400 - 1e400\"", '"' + "n + " * 300 + 'n"',
    "requires_contiguous", "native_strided", "bitwise", "none", "Cpu", "OpenCL", "Vulkan", "IndexSelect",
    "Gather", "MaskedFill", "Fft", "vulkan::index_select", "'test::nothing'",
]
_SCALAR = re.compile(r"(?<=: )([^\s{\[][^,}\]#]*?)(?=\s*(?:[,}\]#]|$))")


@st.composite
def one_value_replaced(draw: st.DrawFn, text: str) -> str:
    """`text` (canonical form) with 1 to 3 scalar values replaced by hostile ones."""
    lines = text.split("\n")
    for _ in range(draw(st.integers(1, 3))):
        candidates = [(i, m) for i, line in enumerate(lines) for m in _SCALAR.finditer(line)]
        i, m = draw(st.sampled_from(candidates))
        new = draw(st.one_of(st.sampled_from(HOSTILE), st.text(max_size=12)))
        lines[i] = lines[i][: m.start(1)] + new + lines[i][m.end(1):]
    return "\n".join(lines)


def _check(text: str) -> None:
    """Parse and link `text` into a fresh registry; only a located ContractError may escape."""
    try:
        lf.load_contracts(parse_check(text), registry=lf.Registry())
    except ContractError as err:
        assert err.reason
        assert 0 <= err.line <= text.count("\n") + 2, err


def parse_check(text: str) -> str:
    """Parse `text` as "mutant.md" (ContractError names that path), and return it."""
    try:
        parse_document(text, "mutant.md")
    except ContractError as err:
        assert err.path == "mutant.md", err
        raise
    return text


@fuzz(300)
@given(st.data())
def test_hostile_values_are_parsed_and_linked_or_refused_with_a_contract_error(data):
    _check(data.draw(one_value_replaced(CANONICAL)))


@fuzz(150)
@given(st.binary(max_size=400))
def test_random_bytes_in_a_file_raise_only_contract_error(tmp_path_factory, raw):
    path = tmp_path_factory.mktemp("c") / "bytes.md"
    path.write_bytes(raw)
    with pytest.raises(ContractError) as info:
        parse_file(path)
    assert info.value.path == str(path)


@fuzz(100)
@given(st.integers(0, len(CANONICAL)), st.binary(min_size=1, max_size=8))
def test_invalid_utf8_inside_a_valid_document_names_the_byte(tmp_path_factory, at, junk):
    raw = CANONICAL.encode()[:at] + b"\xff" + junk + CANONICAL.encode()[at:]
    path = tmp_path_factory.mktemp("c") / "bad.md"
    path.write_bytes(raw)
    with pytest.raises(ContractError, match=r"not UTF-8 text \(.* at byte \d+\)") as info:
        parse_file(path)
    byte = int(re.search(r"at byte (\d+)", info.value.reason)[1])
    assert at - 3 <= byte <= at  # the \xff, or the start of a character it cut in two


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32", "utf-8-sig"])
def test_other_encodings(encoding, tmp_path):
    path = tmp_path / "enc.md"
    path.write_bytes(CANONICAL.encode(encoding))
    if encoding == "utf-8-sig":  # a UTF-8 BOM is dropped: the same document
        assert parse_file(path).contracts == parse_document(CANONICAL, str(path)).contracts
    else:
        with pytest.raises(ContractError, match="not UTF-8"):
            parse_file(path)


def test_bytes_objects_are_a_type_error_naming_what_is_accepted():
    with pytest.raises(TypeError, match="a path or document text, got bytes"):
        parse_contracts(CANONICAL.encode())  # type: ignore[arg-type]
    with pytest.raises(ContractError, match="a contract document is text, got bytes"):
        parse_document(CANONICAL.encode())  # type: ignore[arg-type]


@pytest.mark.parametrize("source", ["canonical", "flattened"])
@pytest.mark.parametrize("transform", ["bom", "crlf", "cr", "bom+crlf", "trailing spaces"])
def test_line_ends_and_a_bom_do_not_change_the_contracts(source, transform):
    text = CANONICAL if source == "canonical" else _seed_text()
    changed = text
    if "crlf" in transform:
        changed = changed.replace("\n", "\r\n")
    if transform == "cr":
        changed = changed.replace("\n", "\r")
    if "bom" in transform:
        changed = "\ufeff" + changed
    if transform == "trailing spaces":  # markdown keeps them in the prose (a line break), YAML drops them
        changed = changed.replace("\n", "  \n")
    got, expected = parse_document(changed).contracts, parse_document(text).contracts
    assert [replace(c, doc="") for c in got] == [replace(c, doc="") for c in expected]
    if transform != "trailing spaces":
        assert got == expected


@fuzz(100)
@given(st.data())
def test_a_tab_in_the_indentation_is_refused_at_its_line(data):
    lines = CANONICAL.split("\n")
    indented = [i for i, line in enumerate(lines) if line.startswith("  ") and ":" in line]
    i = data.draw(st.sampled_from(indented))
    lines[i] = "\t" + lines[i][2:]
    with pytest.raises(ContractError) as info:
        parse_document("\n".join(lines), "tabs.md")
    assert info.value.line == i + 1, info.value


@fuzz(100)
@given(st.integers(1, 3 * MAX_CHARS), st.sampled_from(["a", "[", "&a ", "\n", "🙂"]))
def test_oversize_documents_are_refused_before_any_yaml_is_read(monkeypatch, extra, unit):
    def no_yaml(*args, **kwargs):
        raise AssertionError("YAML was parsed for an oversize document")

    monkeypatch.setattr(nodes_module.yaml, "parse", no_yaml)
    monkeypatch.setattr(nodes_module.yaml, "compose", no_yaml)
    text = CANONICAL + unit * (-(-(MAX_CHARS - len(CANONICAL) + extra) // len(unit)))
    with pytest.raises(ContractError, match=f"at most {MAX_CHARS} are accepted"):
        parse_document(text, "big.md")


def test_oversize_files_are_refused_before_they_are_read(tmp_path, monkeypatch):
    path = tmp_path / "huge.md"
    with open(path, "wb") as handle:  # sparse: 64 MiB of size, no data written
        handle.truncate(16 * MAX_CHARS + 1)

    def no_open(*args, **kwargs):
        raise AssertionError("the oversize file was opened")

    monkeypatch.setattr("builtins.open", no_open)
    with pytest.raises(ContractError, match="bytes long"):
        parse_file(path)


@pytest.mark.parametrize("depth", [nodes_module.MAX_DEPTH + 1, 1000, 100_000])
@pytest.mark.parametrize("where", ["dtypes", "fields", "fast_paths", "front matter"])
def test_deep_nesting_anywhere_is_refused(depth, where):
    deep = "[" * depth + "]" * depth
    anchor = {"dtypes": "dtypes: [U32]", "fields": "dim: { kind: usize",
              "fast_paths": "fast_paths:", "front matter": "fkc_version: 1"}[where]
    text = CANONICAL.replace(anchor, anchor + "\nextra: " + deep, 1)
    with pytest.raises(ContractError):
        parse_document(text)


def test_yaml_loader_in_use_is_the_safe_one():
    assert issubclass(nodes_module._Loader, (yaml.SafeLoader, getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
