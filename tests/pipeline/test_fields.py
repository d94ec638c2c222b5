"""`lazyfuel.pipeline.fields.Scope`: each typed field of a graph read from a `Y` node, params
substituted (`$name`, `$(expr)` over a whitelist, `${name}` in strings), and each wrong value a
GraphError at the node's line naming the key, what was given and what is accepted."""

from __future__ import annotations

import numpy as np
import pytest

from lazyfuel.contracts.expr import MAX_DEPTH, MAX_TEXT
from lazyfuel.pipeline.document import GraphError, read
from lazyfuel.pipeline.fields import Scope, suggest

SCOPE = Scope("g.yaml", "step 'rows'", {"rows": 100, "name": "table", "ratio": 0.25, "flag": True}, "rows")


def y(text: str):
    """The value of `v:` in a one-key document (on line 1)."""
    return read(f"v: {text}\n", "g.yaml").value["v"]


def refused(call, *args) -> GraphError:
    with pytest.raises(GraphError) as caught:
        call(*args)
    err = caught.value
    assert (err.path, err.line, err.context, err.step) == ("g.yaml", 1, "step 'rows'", "rows")
    return err


def why(call, *args) -> str:
    """The reason of the GraphError `call(*args)` raises (at line 1 of g.yaml, in step 'rows')."""
    return refused(call, *args).reason


@pytest.mark.parametrize(("text", "value"), [
    ("$rows", 100), ("$(rows // 3)", 33), ("$(rows / 8)", 12.5), ("$(rows / 4)", 25),
    ("$(-(rows % 7) + 1)", -1),
    ("'${name}.npy'", "table.npy"), ("'no params'", "no params"), ("7", 7), ("$(ratio * 4)", 1),
])
def test_params_are_substituted(text: str, value):
    got = SCOPE.resolve(y(text))
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize(("text", "reason"), [
    ("$rowz", "unknown param 'rowz'; params: flag, name, ratio, rows (did you mean 'rows'?)"),
    ("'${nme}.npy'", "unknown param 'nme'; params: flag, name, ratio, rows (did you mean 'name'?)"),
    ("$(rows // 0)", "division by zero in $(rows // 0)"),
    ("$(name + 1)", "$(name + 1): param 'name' is 'table', not a number"),
    ("$(flag + 1)", "$(flag + 1): param 'flag' is True, not a number"),
    ("$(rows ** 2)", "$(rows ** 2): only numbers, params, + - * / // % and parentheses are allowed"),
    ("$(__import__('os'))", "$(__import__('os')): only numbers, params, + - * / // % and parentheses"),
    ("$(rows +)", "cannot parse the expression $(rows +)"),
])
def test_a_bad_param_or_expression_is_named(text: str, reason: str):
    assert why(SCOPE.resolve, y(text)).startswith(reason)


def test_expressions_are_bounded_before_any_work():
    long = "1+" * (MAX_TEXT // 2) + "1"
    assert why(SCOPE.resolve, y(f"'$({long})'")) == (
        f"the expression $(…) is {len(long)} characters long; at most {MAX_TEXT} are accepted")
    deep = "-" * (MAX_DEPTH + 2) + "1"
    assert why(SCOPE.resolve, y(f"'$({deep})'")).endswith(f"nests deeper than {MAX_DEPTH} levels; "
                                                                      "simplify it")


def test_integers_numbers_fractions_booleans_strings_and_choices():
    assert SCOPE.integer(y("$(rows / 4)"), "n") == 25
    assert why(SCOPE.integer, y("1.5"), "n") == "n must be an integer, got 1.5"
    assert why(SCOPE.integer, y("true"), "n") == "n must be an integer, got True"
    assert why(SCOPE.integer, y("-1"), "n", 0) == "n must be >= 0, got -1"
    assert why(SCOPE.integer, y("-" + "9" * 30), "n", 0) == "n must be >= 0, got an integer of 100 bits"
    assert SCOPE.number(y("true"), "fill") is True and SCOPE.number(y("-2.5"), "fill") == -2.5
    assert why(SCOPE.number, y("x"), "fill") == "fill must be a number (or true/false), got 'x'"
    assert SCOPE.fraction(y("$ratio"), "density") == 0.25
    assert why(SCOPE.fraction, y("1.5"), "density") == "density must be a number from 0 to 1, got 1.5"
    assert SCOPE.boolean(y("$flag"), "b") is True
    assert why(SCOPE.boolean, y("1"), "b") == "b must be true or false, got 1"
    assert why(SCOPE.string, y("''"), "name") == "name must be a non-empty string, got ''"
    assert why(SCOPE.string, y("[1]"), "name") == "name must be a non-empty string, got a list"
    assert SCOPE.choice(y("sync"), "s", ["threads", "sync"]) == "sync"
    assert why(SCOPE.choice, y("thread"), "s", ["threads", "sync"]) == (
        "s: unknown value 'thread'; expected one of threads, sync (did you mean 'threads'?)")


def test_shapes_dtypes_and_chunks():
    assert SCOPE.shape(y("[$rows, 3]")) == (100, 3) and SCOPE.shape(y("5")) == (5,)
    assert why(SCOPE.shape, y("[2, -1]")) == "shape must be >= 0, got -1"
    assert why(SCOPE.integers, y("{a: 1}"), "dims") == "dims must be a list of integers, got a mapping"
    assert SCOPE.dtype(y("float32")) == np.float32 and SCOPE.dtype(y("F32")) == np.float32
    assert SCOPE.dtype(y("u8")) == np.uint8
    assert why(SCOPE.dtype, y("flaot32")).startswith("dtype: unknown dtype 'flaot32'; expected one of ")
    assert why(SCOPE.dtype, y("flaot32")).endswith("(did you mean 'float32'?)")
    assert SCOPE.chunks(y("auto"), 2) == "auto" and SCOPE.chunks(y("8"), 2) == 8
    assert SCOPE.chunks(y("[auto, 4]"), 2) == ("auto", 4)
    assert why(SCOPE.chunks, y("[4]"), 2) == "chunks has 1 entries; expected 2 (one per axis)"
    assert why(SCOPE.chunks, y("[4, 0]"), 2) == "chunks must be >= 1, got 0"


@pytest.mark.parametrize(("text", "size"), [("4096", 4096), ("'96 MiB'", 96 * 2**20),
                                            ("'1.5 GB'", 1_500_000_000), ("'$(rows * 2) KiB'", 200 * 1024),
                                            ("'512b'", 512)])
def test_sizes_take_bytes_or_a_number_and_a_unit(text: str, size: int):
    assert SCOPE.size_bytes(y(text), "memory_limit") == size


def test_a_bad_size_says_what_a_size_looks_like():
    assert why(SCOPE.size_bytes, y("'96 MB/s'"), "memory_limit") == (
        "memory_limit must be a size like '512 MiB' or a number of bytes, got '96 MB/s'")
    assert why(SCOPE.size_bytes, y("'0.1 b'"), "memory_limit") == (
        "memory_limit must be a positive, finite size, got 0.1 b")


def test_a_mapping_names_unknown_and_missing_keys():
    node = read("v:\n  npy: a.npy\n  chunk: 4\n", "g.yaml").value["v"]
    with pytest.raises(GraphError) as caught:
        SCOPE.mapping(node, "input", required=["npy"], optional=["chunks"])
    assert caught.value.line == 3 and caught.value.reason == (
        "unknown key 'chunk' in input; expected one of npy, chunks (did you mean 'chunks'?)")
    assert why(SCOPE.mapping, y("{chunks: 1}"), "input", ["npy"], ["chunks"]) == "input lacks 'npy'"
    assert why(SCOPE.mapping, y("3"), "input") == "input must be a mapping, got 3"
    assert set(SCOPE.mapping(y("{npy: a}"), "input", ["npy"], ["chunks"])) == {"npy"}


def test_a_scope_moves_to_another_part_with_the_same_params():
    other = SCOPE.at("input 'table'")
    assert (other.path, other.context, other.step) == ("g.yaml", "input 'table'", None)
    assert other.params is SCOPE.params
    assert suggest("gathr", ["gather", "index_select"]) == " (did you mean 'gather'?)"
    assert suggest("zzz", ["gather"]) == ""
