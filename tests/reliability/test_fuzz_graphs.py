"""Fuzzing the pipeline graph format (`lazyfuel.pipeline.spec`, `graphs/*.yaml`).

Valid graphs (the shipped ones and a small one using every input kind, op and output kind) are
mutated line by line and token by token, and their values are replaced by hostile ones (huge and
negative numbers, wrong types, `$(...)` expressions with injections, deep nesting, NUL, BOM, CRLF,
tabs, YAML tags, anchors). Each mutant is parsed and built (`build(..., write_stores=False)`:
nothing is written or run). The promise checked: only `GraphError` escapes, its location is a line
of the file and its message is one line; never a KeyError, AttributeError, TypeError,
OverflowError, RecursionError or MemoryError from inside. A graph that builds is still a graph
(`explain` would work on it), so a build that succeeds is fine.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lazyfuel.pipeline import GraphError, build, parse_graph

from .fuzzing import fuzz

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted((REPO / "graphs").glob("*.yaml"))

# A small graph touching every input kind the fuzzer can build without files, every select op,
# the views, params, `$(...)`, limits and each output form.
SMALL = """\
version: 1
description: every kind in a few lines
params:
  rows: 64
  cols: 8
  half: $(rows // 2)
  name: abc
limits: {memory: 512 MiB}
inputs:
  table: {random: {shape: [$rows, $cols], dtype: float32, chunks: [16, $cols], seed: 0}}
  ids: {indices: {shape: [$half], high: $rows, seed: 1, chunks: 8}}
  perm: {indices: {shape: [$cols, $half], high: $cols, seed: 2}}
  drop: {mask: {shape: [$cols, $half], density: 0.25, seed: 3}}
  few: {values: [[1, 2], [3, 4]], dtype: int64}
steps:
  - name: rows_
    op: index_select
    x: table
    dim: 0
    indices: ids
  - name: t
    op: transpose
    x: rows_
  - name: g
    op: gather
    x: t
    dim: 0
    indices: perm
  - name: m
    op: masked_fill
    x: g
    mask: drop
    value: 0.5
  - name: c
    op: contiguous
    x: m
outputs:
  - value: c
  - few
  - {value: rows_, npy: out/rows.npy}
"""

HOSTILE = [
    "-1", "0", "-0", "1e400", "-1e400", ".nan", ".inf", "2147483648", "4294967296", "18446744073709551616",
    "9" * 400, "0x10", "0o7", "1_000", "true", "null", "~", "''", '""', "[]", "{}", "[[[[[[1]]]]]]",
    "[1, [2]]", "[-1, 3]", "[1e400]", "[0, 0]", "[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]",
    "$rows", "$nope", "$(rows * rows * rows * rows * rows)", "$(9**9**9)", "$(__import__('os'))",
    "$(rows.real)", "$(rows if rows else 1)", "$(1/0)", "$(rows % 0)", "$(1e400)", "$(-rows)",
    "$(1e400 - 1e400)", "$(" + "(" * 200 + "1" + ")" * 200 + ")", "$(" + "-" * 5000 + "1)",
    "$(" + "+".join(["rows"] * 2000) + ")", "$(name * 1000000000000)", "$(rows",
    "'${rows}'", "${nope}", "$", "$()", "$(lambda: 1)", "!!python/object/apply:os.system ['true']",
    "!!binary aGk=", "&a 1", "*a", "<<: {a: 1}", "float31", "bool", "uint8", "complex128", "int16",
    "'../../etc/passwd'", "/dev/zero", "'\\0'", '"\\x00"', '"\\ud800"', "é🙂", "{random: {}}", "auto",
    "[auto, auto]", "'512 ZiB'", "'$(1e400) MiB'", "'-5 MiB'", "'1e999 MiB'", "'$(0) MiB'", "'nan MiB'",
    "index_select", "gather", "masked_fill", "fft", "rfft", "transpose", "broadcast_to", "x", "t",
]
JUNK_LINES = [
    "", "#", "---", "...", "- ", "-", ":", "? x", "\t", "  x: 1", "- name: z\n    op: gather", "[", "{",
    "steps: []", "inputs: {}", "outputs: []", "version: 2", "params: 5", "\ufeff", "\x00", "\r",
    "  - name: rows_\n    op: index_select", "&a x: 1", "*a", "%YAML 1.1", "!foo x: 1", "a: !!set {1}",
]
_VALUE = re.compile(r":[ \t]*([^\s{}\[\],#][^{}\[\],#]*?)?(?=[,}\]#]|$)")
OPERATIONS = ("value", "delete", "duplicate", "swap", "junk", "indent", "truncate", "characters")


@st.composite
def mutated(draw: st.DrawFn, text: str, operations: tuple[str, ...] = OPERATIONS) -> str:
    """`text` with 1 to 3 of `operations` applied (`value` keeps the YAML valid: it replaces a value)."""
    lines = text.split("\n")
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(operations))
        i = draw(st.integers(0, max(len(lines) - 1, 0)))
        if not lines:
            lines = [""]
        if op == "value":
            values = [m for m in _VALUE.finditer(lines[i]) if m.group(1)]
            if values:
                m = draw(st.sampled_from(values))
                new = draw(st.one_of(st.sampled_from(HOSTILE), st.text(max_size=10)))
                lines[i] = lines[i][: m.start(1)] + new + lines[i][m.end(1):]
        elif op == "delete" and len(lines) > 1:
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "junk":
            lines.insert(i, draw(st.one_of(st.sampled_from(JUNK_LINES), st.text(max_size=20))))
        elif op == "indent":
            lines[i] = draw(st.sampled_from([" ", "  ", "\t", "    "])) + lines[i]
        elif op == "truncate":
            joined = "\n".join(lines)
            lines = joined[: draw(st.integers(0, len(joined)))].split("\n")
        elif op == "characters":
            at = draw(st.integers(0, len(lines[i])))
            new = draw(st.sampled_from(["\ufeff", "\r", "\r\n", "\x00", "\x85", "\u2028", "\t", "é", "\ud800",
                                        "\x1b", "'", '"', "&", "*", "!", "|", ">"]))
            lines[i] = lines[i][:at] + new + lines[i][at:]
    return "\n".join(lines)


def check_only_graph_errors(text: str, tmp_path: Path) -> None:
    """Parse and build `text`; only GraphError (located in the file, one line of message) may escape."""
    path = str(tmp_path / "mutant.yaml")
    try:
        graph = parse_graph(text, path, base=tmp_path)
        build(graph, log=lambda message: None, write_stores=False)
    except GraphError as err:
        assert err.path == path, err
        assert 0 <= err.line <= text.count("\n") + 2 + text.count("\r"), err
        assert err.reason and "\n" not in str(err), repr(str(err))


# What each unmutated graph's outputs are: (value, shape, dtype), in the graph's order.
BUILT = {
    "embedding_lookup.yaml": [("masked", (16384, 256), "bfloat16")],
    "out_of_core.yaml": [("features", (262144, 32), "float32")],
    "quickstart.yaml": [("dropped", (128, 32768), "float32"), ("samples", (32768, 128), "float32")],
    "spectral_features.yaml": [("spectrum", (4096, 257), "complex64")],
    "small": [("c", (8, 32), "float32"), ("few", (2, 2), "int64"), ("rows_", (32, 8), "float32")],
}


def test_every_shipped_graph_has_its_expected_outputs():
    assert sorted(BUILT) == sorted([p.name for p in SHIPPED] + ["small"])


@pytest.mark.parametrize("name", sorted(BUILT))
def test_the_unmutated_graphs_build_their_outputs(name, tmp_path):
    text = SMALL if name == "small" else (REPO / "graphs" / name).read_text(encoding="utf-8")
    graph = parse_graph(text, str(tmp_path / name), base=tmp_path)
    built = build(graph, log=lambda message: None, write_stores=False)
    assert [(spec.value, arr.shape, arr.dtype.name) for spec, arr in built.outputs] == BUILT[name]
    assert all(arr is built.values[spec.value] for spec, arr in built.outputs)


@fuzz(250)
@given(st.data())
def test_mutated_small_graph_raises_only_graph_error(tmp_path_factory, data):
    check_only_graph_errors(data.draw(mutated(SMALL)), tmp_path_factory.mktemp("g"))


@fuzz(250)
@given(st.data())
def test_hostile_values_in_a_valid_graph_raise_only_graph_error(tmp_path_factory, data):
    """Only values replaced: most mutants are valid YAML, so they reach the field readers and build."""
    check_only_graph_errors(data.draw(mutated(SMALL, ("value",))), tmp_path_factory.mktemp("g"))


@fuzz(150)
@given(st.data())
def test_mutated_shipped_graphs_raise_only_graph_error(tmp_path_factory, data):
    path = data.draw(st.sampled_from(SHIPPED))
    text = data.draw(mutated(path.read_text(encoding="utf-8")))
    check_only_graph_errors(text, tmp_path_factory.mktemp("g"))


@fuzz(100)
@given(st.text(max_size=300))
def test_arbitrary_text_raises_only_graph_error(tmp_path_factory, text):
    check_only_graph_errors(text, tmp_path_factory.mktemp("g"))


@pytest.mark.parametrize("ending", ["\r\n", "\r"])
def test_other_line_endings_and_a_bom_read_as_the_same_graph(ending, tmp_path):
    plain = parse_graph(SMALL, "g.yaml", base=tmp_path)
    other = parse_graph("\ufeff" + SMALL.replace("\n", ending), "g.yaml", base=tmp_path)
    assert repr((other.params, other.inputs, other.steps, other.outputs)) == repr(
        (plain.params, plain.inputs, plain.steps, plain.outputs))


@pytest.mark.parametrize(("expression", "reason"), [
    ("$(name * 1000000000000)", "not a number"),
    ("$(9**9**9)", "only numbers"),
    ("$(__import__('os').system('true'))", "only numbers"),
    ("$(" + "-" * 5000 + "1)", "at most 1000"),
    ("$(" + "-" * 900 + "1)", "cannot parse|nests deeper"),
    ("$(" + "-(" * 60 + "1" + ")" * 60 + ")", "nests deeper than 50"),
    ("$(" + "(" * 300 + "1" + ")" * 300 + ")", "cannot parse"),
    ("$(1e400)", "integer"),
    ("$(1e400 - 1e400)", "integer"),
])
def test_param_expressions_are_refused_without_being_computed(expression, reason, tmp_path):
    """`$(...)` in a graph is integer arithmetic over params; strings, huge powers, injections and
    deep nesting are refused with a GraphError at the line, before any work is done."""
    text = SMALL.replace("ids: {indices: {shape: [$half]", f"ids: {{indices: {{shape: [{expression}]")
    with pytest.raises(GraphError, match=reason) as info:
        parse_graph(text, "g.yaml", base=tmp_path)
    assert info.value.line == text.split("\n").index(next(
        line for line in text.split("\n") if line.startswith("  ids:"))) + 1


@pytest.mark.parametrize("memory", ["'$(1e400) MiB'", "'1e999 MiB'", "'$(1e400 - 1e400) MiB'", "1e400",
                                    "'nan MiB'", "-5", "'0 MiB'"])
def test_memory_limits_that_are_not_a_size_are_refused(memory, tmp_path):
    text = SMALL.replace("limits: {memory: 512 MiB}", f"limits: {{memory: {memory}}}")
    with pytest.raises(GraphError, match="memory") as info:
        parse_graph(text, "g.yaml", base=tmp_path)
    assert info.value.line == 8


@pytest.mark.parametrize(("old", "new", "reason", "line"), [
    ("  rows: 64", "  rows: " + "9" * 400, r"more than 10\*\*12 blocks", 10),
    ("  rows: 64", "  rows: 2147483648", "134,217,728 blocks; at most 1000000", 10),
    ("[$rows, $cols], dtype: float32, chunks: [16, $cols]", "[1000000000000, 1000000000000], dtype: float32",
     "blocks; at most 1000000", 10),
    ("params:\n  rows: 64", "params:\n- \n  rows: 64", "params must be a mapping", 4),
    ("density: 0.25", "density: " + "9" * 400, "density must be a number from 0 to 1, got an integer of", 13),
    ("density: 0.25", "density: -" + "9" * 5000, "cannot be read: Exceeds the limit", 13),
])
def test_graphs_found_by_the_fuzzer(old, new, reason, line, tmp_path):
    """Each escaped before: huge params as an OverflowError, huge block counts as a hang in dask's
    chunk planning, a params list as a TypeError, a huge density as an OverflowError, an integer
    past Python's 4300-digit conversion limit as a ValueError from YAML."""
    with pytest.raises(GraphError, match=reason) as info:
        parse_graph(SMALL.replace(old, new), "g.yaml", base=tmp_path)
    assert info.value.line == line
