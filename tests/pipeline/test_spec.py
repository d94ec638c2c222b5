"""Graph parsing details: params and their overrides, expressions, sizes, indices, paths, ops."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import lazyfuel as lf
from lazyfuel.pipeline import OPS, GraphError, available_ops, load_graph, parse_graph

from .conftest import write_graph

BASE = """
params:
  rows: 64
  quarter: $(rows // 4)
inputs:
  a: {random: {shape: [$rows, 8], chunks: [$quarter, 8]}}
steps:
  - {name: t, op: transpose, x: a}
outputs:
  - {value: t, npy: "out/t_${rows}.npy"}
"""


def test_params_expressions_and_paths(tmp_path: Path):
    graph = load_graph(write_graph(tmp_path, BASE))
    a = graph.inputs[0].options
    assert (a.shape, a.chunks) == ((64, 8), (16, 8))
    assert graph.outputs[0].path == tmp_path / "out" / "t_64.npy"
    assert graph.params["threads"] >= 1


def test_overrides_replace_params_and_flow_into_later_ones(tmp_path: Path):
    graph = load_graph(write_graph(tmp_path, BASE), {"rows": "128"})
    assert graph.inputs[0].options.shape == (128, 8)
    assert graph.inputs[0].options.chunks == (32, 8)
    assert graph.outputs[0].path.name == "t_128.npy"


def test_an_unknown_override_is_refused_at_the_params_line(tmp_path: Path):
    with pytest.raises(GraphError) as caught:
        load_graph(write_graph(tmp_path, BASE), {"rowz": "1"})
    assert caught.value.line == 3
    assert "--set rowz: the graph has no param 'rowz'; params: rows, quarter (did you mean 'rows'?)" in str(
        caught.value)


@pytest.mark.parametrize(("expr", "message"), [
    ("$(rows / 0)", "division by zero in $(rows / 0)"),
    ("$(__import__('os'))", "only numbers, params, + - * / // % and parentheses are allowed"),
    ("$(rows ** 2)", "only numbers, params"),
    ("$(rows +)", "cannot parse the expression"),
])
def test_expressions_are_whitelisted(expr: str, message: str):
    with pytest.raises(GraphError) as caught:
        parse_graph(BASE.replace("$(rows // 4)", f'"{expr}"'))
    assert caught.value.line == 4 and caught.value.context == "params"
    assert message in caught.value.reason


def test_sizes_accept_units_and_expressions():
    text = BASE + "limits: {memory: '$(16 + 8 * 2) MiB'}\n"
    assert parse_graph(text).memory_limit == 32 * 2**20
    assert parse_graph(BASE + "limits: {memory: 1.5 GB}\n").memory_limit == 1_500_000_000
    assert parse_graph(BASE + "limits: {memory: 4096}\n").memory_limit == 4096


def test_index_syntax_string_and_list():
    def index(spec: str) -> tuple:
        graph = parse_graph("inputs:\n  a: {random: {shape: [4, 5, 6]}}\nsteps:\n"
                            f"  - {{name: s, op: slice, x: a, index: {spec}}}\noutputs: [s]\n")
        return graph.steps[0].params["index"]

    assert index('"::2, 1:"') == (slice(None, None, 2), slice(1, None))
    assert index('"..., -1"') == (Ellipsis, -1)
    assert index('[1, "::-1", "..."]') == (1, slice(None, None, -1), Ellipsis)
    with pytest.raises(GraphError, match=re.escape("'1:2:3:4' is not an int, a slice a:b:c or '...'")):
        index('"1:2:3:4"')


def test_outputs_shorthand_and_default_kind():
    graph = parse_graph(BASE.replace('  - {value: t, npy: "out/t_${rows}.npy"}', "  - t\n  - {value: a}"))
    got = [(o.value, o.kind, o.path) for o in graph.outputs]
    assert got == [("t", "summary", None), ("a", "summary", None)]


def test_the_op_table_covers_the_public_api():
    for name in ("index_select", "gather", "masked_fill", "transpose", "broadcast_to", "contiguous"):
        assert name in available_ops() and callable(getattr(lf, name))
    assert {"slice", "getitem"} <= set(available_ops())
    for name in ("fft", "ifft", "rfft", "irfft"):
        assert OPS[name].available == hasattr(lf, name)
        assert (name in available_ops()) == hasattr(lf, name)


def test_a_missing_file_is_one_error():
    with pytest.raises(GraphError, match=r"^nowhere\.yaml: cannot read the graph: No such file"):
        load_graph("nowhere.yaml")


def test_the_example_in_docs_graphs_md_builds(tmp_path: Path):
    from lazyfuel.pipeline import build

    from .conftest import REPO

    text = (REPO / "docs" / "graphs.md").read_text(encoding="utf-8")
    example = re.search(r"```yaml\n(.*?)```", text, re.S).group(1)
    built = build(parse_graph(example, "graphs.md", base=tmp_path), write_stores=False)
    assert built.values["dropped"].shape == (25000, 128)


@pytest.mark.parametrize(("name", "dtype"), [("int8", "int8"), ("i16", "int16"), ("uint16", "uint16"),
                                             ("u64", "uint64")])
def test_the_new_dtypes_have_names_and_aliases(tmp_path: Path, name: str, dtype: str):
    """Issue 15: the graph format names every lazyfuel dtype (taken from `DType`, one home)."""
    graph = load_graph(write_graph(tmp_path, BASE.replace("chunks: [$quarter, 8]",
                                                          f"chunks: [$quarter, 8], dtype: {name}")))
    assert graph.inputs[0].options.dtype == dtype
