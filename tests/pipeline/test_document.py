"""`lazyfuel.pipeline.document.read`: a graph's YAML as `Y` nodes that remember their lines (and
each key's), and every construct a graph refuses named with its line: anchors and aliases, merge
keys, tags, non-string and duplicate keys, several documents, characters YAML refuses, an empty
file, a value Python cannot convert."""

from __future__ import annotations

import pytest

from lazyfuel.pipeline.document import GraphError, Y, read

GRAPH = """\
version: 1
inputs:
  table: {npy: table.npy}
steps:
  - name: rows
    op: index_select
    args: [table, 0, [3, 1]]
ratio: 0.5
flag: true
none: null
"""


def test_nodes_hold_values_lines_and_key_lines():
    root = read(GRAPH, "g.yaml")
    assert root.is_map and root.line == 1
    assert root.key_lines == {"version": 1, "inputs": 2, "steps": 4, "ratio": 8, "flag": 9, "none": 10}
    steps = root.value["steps"]
    assert steps.is_list and steps.line == 5
    step = steps.value[0]
    assert step.key_lines == {"name": 5, "op": 6, "args": 7} and step.value["op"] == Y("index_select", 6)
    assert step.value["args"].value[2].value[0] == Y(3, 7)
    assert root.plain() == {"version": 1, "inputs": {"table": {"npy": "table.npy"}},
                            "steps": [{"name": "rows", "op": "index_select", "args": ["table", 0, [3, 1]]}],
                            "ratio": 0.5, "flag": True, "none": None}


@pytest.mark.parametrize(("text", "line", "reason"), [
    ("a: &x 1\nb: *x\n", 1, "YAML anchors and aliases are not allowed in a graph; write the value out"),
    ("base: {k: 1}\nother:\n  <<: {k: 2}\n", 3, "YAML merge keys ('<<') are not allowed in a graph"),
    ("a: !!python/object:os.system ls\n", 1, "YAML tag 'tag:yaml.org,2002:python/object:os.system' is not "
                                             "allowed; graphs hold strings, numbers, booleans and null"),
    ("a: !!set {x}\n", 1, "YAML tag 'tag:yaml.org,2002:set' is not allowed; use a plain mapping"),
    ("a: !custom [1]\n", 1, "YAML tag '!custom' is not allowed; use a plain list"),
    ("a: 1\n3: b\n", 2, "keys must be names (strings), got 3"),
    ("a: 1\nb: 2\na: 3\n", 3, "duplicate key 'a' (first on line 1)"),
    ("", 1, "the graph is empty; expected a mapping with inputs, steps and outputs"),
    ("a: 1\n---\nb: 2\n", 2, "YAML syntax: but found another document (expected a single document in "
                           "the stream on line 1)"),
    ("a: [1, 2\nb: 3\n", 2, "YAML syntax: expected ',' or ']', but got ':' (while parsing a flow sequence "
                          "on line 1)"),
    ("a: 1\nb: \x07\n", 2, "character '\\x07' (U+0007) is not allowed in YAML; remove it or write it as "
                           "an escape inside a double-quoted string"),
    ("n: " + "9" * 5000 + "\n", 1, "the value '99999999999999999999'... cannot be read: "),
])
def test_what_a_graph_refuses_is_named_with_its_line(text: str, line: int, reason: str):
    with pytest.raises(GraphError) as caught:
        read(text, "g.yaml")
    err = caught.value
    assert (err.path, err.line) == ("g.yaml", line), str(err)
    assert err.reason.startswith(reason), err.reason
    assert str(err) == f"g.yaml:{line}: {err.reason}"


def test_an_error_prints_its_place_and_part():
    assert str(GraphError("unknown op 'gathr'", "q.yaml", 14, "step 'rows'", "rows")) == (
        "q.yaml:14: step 'rows': unknown op 'gathr'")
    assert str(GraphError("cannot read the graph", "q.yaml")) == "q.yaml: cannot read the graph"
    err = GraphError("r", "p", 2, "outputs")
    assert (err.path, err.line, err.context, err.step, err.reason) == ("p", 2, "outputs", None, "r")
    assert isinstance(err, ValueError)
