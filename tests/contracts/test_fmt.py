"""The canonical form: it re-imports equal, is plain correctly nested YAML, and is a fixed point."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lazyfuel.contracts import ContractDocument, ContractError, format_document, format_text, parse_document
from lazyfuel.contracts.fmt import format_contract, quoted, scalar
from lazyfuel.contracts.parse import split_lines, yaml_sections

from .conftest import SEED, SHIPPED, SMALL

DOCUMENTS = [SEED, SMALL, *SHIPPED]


def _ids(path: Path) -> str:
    return path.name


@pytest.fixture(params=DOCUMENTS, ids=_ids)
def document(request: pytest.FixtureRequest) -> tuple[str, str]:
    path: Path = request.param
    return str(path), path.read_text(encoding="utf-8")


def test_shipped_documents_are_globbed() -> None:
    assert SMALL in DOCUMENTS
    assert all(p.suffix == ".md" and p.parent.name == "contracts" for p in SHIPPED)


def test_round_trip_gives_equal_contracts(document: tuple[str, str]) -> None:
    path, text = document
    original = parse_document(text, path)
    formatted = parse_document(format_text(text, path), path)
    assert formatted.contracts == original.contracts
    assert formatted.provider == original.provider
    assert formatted.prose == original.prose
    assert [c.doc for c in formatted.contracts] == [c.doc for c in original.contracts]


def test_formatting_is_idempotent(document: tuple[str, str]) -> None:
    path, text = document
    once = format_text(text, path)
    assert format_text(once, path) == once


def test_each_block_is_plain_yaml_with_the_right_nesting(document: tuple[str, str]) -> None:
    path, text = document
    formatted = format_text(text, path)
    doc = parse_document(formatted, path)
    front, *blocks = yaml_sections(split_lines(formatted), path)
    meta = yaml.safe_load("\n".join(front))
    assert meta["fkc_version"] == 1
    assert meta["provider"]["name"] == doc.provider.name
    assert meta["provider"]["link_registry"] == doc.provider.link_registry
    assert len(blocks) == len(doc.contracts)
    for body, c in zip(blocks, doc.contracts):
        data = yaml.safe_load("\n".join(body))
        assert data["kernel"] == c.kernel
        inputs = data["accept"]["inputs"]
        assert [i["name"] for i in inputs] == [i.name for i in c.inputs]
        assert [i["dtypes"] for i in inputs] == [[d.name for d in i.dtypes] for i in c.inputs]
        assert [i["layout"]["contiguous"] for i in inputs] == [i.layout.contiguous.name for i in c.inputs]
        assert [i["rank"] for i in inputs] == ["any" if i.rank is None else i.rank for i in c.inputs]
        assert list(data["op_params"]["fields"] or {}) == list(c.op_params.names)
        assert all(set(f) >= {"kind"} for f in (data["op_params"]["fields"] or {}).values())
        assert [o["shape_rule"] for o in data["return"]["outputs"]] == [str(o.shape_rule) for o in c.outputs]
        assert [f["class"] for f in data["caps"]["fast_paths"]] == [f.cls for f in c.caps.fast_paths]
        assert data["cost"]["bytes_moved"] == c.cost.bytes_moved.text
        assert data["precision"]["audited"] is c.precision.audited
        assert data["determinism"] == c.determinism.name
        assert set(data) == {
            "kernel", "op_kind", "blurb", "backend", "kernel_source", "entry_point", "kernel_revision_hash",
            "accept", "op_params", "return", "caps", "cost", "precision", "determinism"}


def test_seed_canonical_form_keeps_prose_and_comments() -> None:
    text = SEED.read_text(encoding="utf-8")
    formatted = format_text(text)
    assert formatted.startswith("---\nfkc_version: 1\nprovider:\n  name: \"fuel-vulkan-kernels\"\n")
    assert "  backend: Vulkan # maps to BackendId::Vulkan\n" in formatted
    assert ("    - name: source\n      dtypes: [F32, F16, BF16, F64] # fans the per-dtype wrapper (§3.4); "
            "indices fixed U32\n") in formatted
    assert ('  fields:\n    outer_count: { kind: usize, note: "product of dims before the selected axis" }\n'
            in formatted)
    assert '    - { when: "all_inputs_contiguous", class: cheap_elementwise }\n' in formatted
    dim = '    dim: { kind: usize, note: "gathered axis", constraint: "< source_shape.len()" }\n'
    assert dim in formatted
    # the prose between the blocks is kept byte for byte
    for part in parse_document(text).prose_parts:
        assert part in formatted
    # same number of lines: the seed has no blank lines inside blocks, so the layout is kept 1:1
    assert len(split_lines(formatted)) == len(split_lines(text))


def test_own_line_comments_stay_with_their_key(small_text: str) -> None:
    text = small_text.replace("caps:\n", "# why these caps\ncaps:\n").replace(
        "determinism: bitwise\n", "determinism: bitwise\n# trailing note\n")
    formatted = format_text(text)
    assert "# why these caps\ncaps:\n" in formatted
    assert "determinism: bitwise\n# trailing note\n```" in formatted
    assert format_text(formatted) == formatted


def test_blank_lines_inside_blocks_are_dropped(small_text: str) -> None:
    formatted = format_text(small_text.replace("accept:\n", "\naccept:\n"))
    assert "\n\naccept:" not in formatted


def test_malformed_text_is_not_formatted(small_text: str) -> None:
    with pytest.raises(ContractError, match="unknown dtype"):
        format_text(small_text.replace("[U32]", "[U33]"))


def test_document_built_without_prose_parts_formats(small_text: str) -> None:
    doc = parse_document(small_text)
    bare = ContractDocument(doc.path, doc.provider, doc.prose, doc.contracts)
    again = parse_document(format_document(bare))
    assert again.contracts == doc.contracts
    assert again.prose == doc.prose


def test_format_contract_is_the_block_body(small_text: str) -> None:
    c = parse_document(small_text).contracts[0]
    body = format_contract(c)
    assert body.startswith("kernel: gather\nop_kind: Gather\n")
    assert yaml.safe_load(body)["accept"]["inputs"][1]["name"] == "indices"


def test_values_that_need_quotes_round_trip(small_text: str) -> None:
    c = parse_document(small_text).contracts[0]
    odd = replace(c, blurb='say "yes": a #1 \\ tab\t€ \x85 end', entry_point="yes",
                  kernel_revision_hash="00ab",
                  precision=replace(c.precision, max_relative=1e-06, max_absolute=float("inf"), max_ulp=0.5))
    doc = parse_document(small_text)
    text = format_document(replace(doc, contracts=(odd,)))
    assert parse_document(text).contracts == (odd,)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",))))
@example("A\n")  # a word and a trailing newline once came out plain and read back without it
def test_scalar_reads_back_as_the_same_string(value: str) -> None:
    assert yaml.safe_load(f"k: {scalar(value)}")["k"] == value
    assert yaml.safe_load(f"k: {{ a: {quoted(value)} }}")["k"]["a"] == value


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.floats(min_value=0, allow_nan=False), st.integers(), st.booleans()))
def test_scalar_reads_back_as_the_same_number(value: object) -> None:
    assert yaml.safe_load(f"k: {scalar(value)}")["k"] == value


def test_canonical_blocks_use_two_space_indentation(document: tuple[str, str]) -> None:
    path, text = document
    _, *blocks = yaml_sections(split_lines(format_text(text, path)), path)
    for body in blocks:
        for line in body:
            indent = len(line) - len(line.lstrip(" "))
            assert indent % 2 == 0 and not re.match(r"^\s*\t", line)
