"""Malformed documents: each error names the file, the 1-based line and the key, and says what is accepted.

`malformed/` holds one document per fault; `malformed/expected.yaml` declares for each the line,
the key and a fragment of the message, asserted exactly here. A hypothesis test mutates the
reference document (deletes, duplicates, swaps and re-indents lines, replaces tokens, inserts
junk, truncates) and checks that nothing but `ContractError` ever escapes, quickly.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lazyfuel.contracts import ContractError, format_text, parse_contracts, parse_document

from .conftest import SEED, SMALL

CORPUS = Path(__file__).parent / "malformed"
EXPECTED: dict[str, dict[str, object]] = yaml.safe_load(
    (CORPUS / "expected.yaml").read_text(encoding="utf-8"))

# Bounds that catch exponential blow-ups (alias expansion, deep recursion), not speed: generous,
# so a loaded CI machine never trips them.
FAST = 10.0


def test_corpus_is_complete() -> None:
    files = {p.name for p in CORPUS.glob("*.md")}
    assert files == set(EXPECTED), "every malformed document needs an entry in expected.yaml, and back"
    assert len(files) >= 30


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_malformed_document_error(name: str) -> None:
    expected = EXPECTED[name]
    path = CORPUS / name
    with pytest.raises(ContractError) as info:
        parse_contracts(path)
    err = info.value
    assert err.path == str(path)
    assert (err.line, err.key) == (expected["line"], expected["key"]), err
    assert expected["message"] in err.reason
    where = f"{path}:{err.line}" if err.line else str(path)
    assert str(err).startswith(f"{where}: {err.key}: " if err.key else f"{where}: ")


def test_corpus_base_is_valid() -> None:
    assert [c.kernel for c in parse_contracts(SMALL)] == ["gather"]


def _billion_laughs(levels: int) -> str:
    lines = ['lol0: &l0 "lol"']
    for i in range(1, levels):
        refs = ", ".join([f"*l{i - 1}"] * 10)
        lines.append(f"lol{i}: &l{i} [{refs}]")
    return "\n".join(lines)


@pytest.mark.parametrize("where", ["front matter", "block"])
def test_alias_bomb_fails_fast(small_text: str, where: str) -> None:
    bomb = _billion_laughs(12)
    if where == "block":
        text = small_text.replace("determinism: bitwise\n", "determinism: bitwise\n" + bomb + "\n")
    else:
        text = small_text.replace("fkc_version: 1\n", "fkc_version: 1\n" + bomb + "\n")
    start = time.perf_counter()
    with pytest.raises(ContractError, match="anchors and aliases"):
        parse_document(text)
    assert time.perf_counter() - start < FAST  # an expanded bomb would never finish


def test_deep_nesting_fails_fast(small_text: str) -> None:
    text = small_text.replace('blurb: "N-D gather."', "blurb: " + "[" * 200_000 + "]" * 200_000)
    start = time.perf_counter()
    with pytest.raises(ContractError, match="blurb"):
        parse_document(text)
    assert time.perf_counter() - start < FAST


def test_merge_keys_and_multiple_documents_are_refused(small_text: str) -> None:
    with pytest.raises(ContractError):
        parse_document(small_text.replace("determinism: bitwise\n", "determinism: bitwise\n<<: {a: 1}\n"))
    second_document = "determinism: bitwise\n...\n---\nkernel: x\n"
    with pytest.raises(ContractError, match=r"YAML syntax error: .*single document") as info:
        parse_document(small_text.replace("determinism: bitwise\n", second_document))
    assert info.value.line == 67


# ---------------------------------------------------------------------------------------------
# Mutation fuzzing of the reference document

JUNK = [
    "&a", "*a", "&a [1, 2]", "!!python/object/apply:os.system ['true']", "!!binary aGk=", "!foo", "[", "]",
    "{", "}", '"', "'", ": ", "- ", "-", "#", "|", ">-", "---", "...", "```", "```fkc", "~~~", "\t", "\x00",
    "\x07", "\x85", "\u2028", "\ud800", "\ufeff", "auto", "any", "-1", "1e400", "1.0e+400", ".nan", ".inf",
    "passthrough(", "from_params()", "same_as(out)", "**", "__import__('os')", "n.real", "~", "!", "%",
    "@", "`", "0x1f", "null", "yes", "<<: *a", "? ", "F31", "U8", "BOOL", "Cpu", "rejected", "accepted",
    "required", "true", "2 ** 99999999", "(" * 60, "9" * 5000, "é", "🙂", "\r", "\r\n", "  ", "    ",
]
MAX_MUTATIONS = 4
OPERATIONS = ["delete", "duplicate", "swap", "token", "junk", "indent", "line", "truncate"]
_TOKEN = re.compile(r"[A-Za-z_0-9.]+|[^\sA-Za-z_0-9.]")


@st.composite
def _mutated(draw: st.DrawFn, text: str) -> str:
    lines = text.split("\n")
    for _ in range(draw(st.integers(1, MAX_MUTATIONS))):
        n = len(lines)
        op = draw(st.sampled_from(OPERATIONS))
        i = draw(st.integers(0, max(n - 1, 0)))
        if not lines:
            lines = [""]
        if op == "delete" and n > 1:
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = draw(st.integers(0, n - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "token":
            tokens = list(_TOKEN.finditer(lines[i]))
            if tokens:
                tok = draw(st.sampled_from(tokens))
                new = draw(st.one_of(st.sampled_from(JUNK), st.text(max_size=8)))
                lines[i] = lines[i][: tok.start()] + new + lines[i][tok.end():]
        elif op == "junk":
            at = draw(st.integers(0, len(lines[i])))
            new = draw(st.one_of(st.sampled_from(JUNK), st.text(min_size=1, max_size=12)))
            lines[i] = lines[i][:at] + new + lines[i][at:]
        elif op == "indent":
            lines[i] = draw(st.sampled_from([" ", "  ", "    ", "\t"])) + lines[i]
        elif op == "line":
            lines.insert(i, draw(st.one_of(st.sampled_from(JUNK), st.text(max_size=30))))
        elif op == "truncate":
            joined = "\n".join(lines)
            lines = joined[: draw(st.integers(0, len(joined)))].split("\n")
    return "\n".join(lines)


def _seed_text() -> str:
    return SEED.read_text(encoding="utf-8")


def _check_only_contract_errors(text: str) -> None:
    start = time.perf_counter()
    try:
        doc = parse_document(text, "mutant.md")
    except ContractError as err:
        assert err.path == "mutant.md"
        assert 0 <= err.line <= text.count("\n") + 2, err
        assert err.reason
    else:
        # whatever imports must also format, re-import equal, and format idempotently
        formatted = format_text(text, "mutant.md")
        again = parse_document(formatted, "mutant.md")
        assert again.contracts == doc.contracts
        assert again.provider == doc.provider
        assert format_text(formatted) == formatted
    assert time.perf_counter() - start < FAST, "a malformed document must fail fast"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_seed_raises_only_contract_error(data: st.DataObject) -> None:
    _check_only_contract_errors(data.draw(_mutated(_seed_text())))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_canonical_form_raises_only_contract_error(data: st.DataObject) -> None:
    _check_only_contract_errors(data.draw(_mutated(format_text(_seed_text()))))
