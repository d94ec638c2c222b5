"""Cost expressions: the whitelist, the evaluator, and refusals of everything else."""

from __future__ import annotations

import ast
import math
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyfuel.contracts import expr as expr_module
from lazyfuel.contracts.expr import MAX_DEPTH, MAX_TEXT, Expr
from lazyfuel.contracts.model import ContractError, Location

LOC = Location("kernels.md", 42, "bytes_moved")
NAMES = ("n", "dtype_bytes", "outer_count", "shape")


def parse(text: str) -> Expr:
    return Expr.parse(text, NAMES, LOC)


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("0", {}, 0.0),
        ("2 * n * dtype_bytes", {"n": 10, "dtype_bytes": 4}, 80.0),
        ("(n + 1) * 2", {"n": 3}, 8.0),
        ("n // 3", {"n": 10}, 3.0),
        ("n % 3", {"n": 10}, 1.0),
        ("n / 4", {"n": 10}, 2.5),
        ("-n + +2", {"n": 10}, -8.0),
        ("1.5e3 * dtype_bytes", {"dtype_bytes": 2}, 3000.0),
        ("shape * dtype_bytes", {"shape": [2, 3, 4], "dtype_bytes": 8}, 192.0),
        ("shape", {"shape": ()}, 1.0),  # a 0-d shape has one element
        ("shape", {"shape": np.array([5, 6])}, 30.0),
        ("n", {"n": np.int64(7)}, 7.0),
    ],
)
def test_evaluates_whitelisted_arithmetic(text: str, env: dict, expected: float) -> None:
    assert parse(text).evaluate(env) == expected


def test_names_and_text() -> None:
    e = parse(" 2 * outer_count * n ")
    assert e.text == "2 * outer_count * n"
    assert e.names == frozenset({"outer_count", "n"})
    assert str(e) == e.text


def test_equality_is_by_text() -> None:
    assert parse("2 * n") == Expr.parse("2 * n", ["n"], Location("other.md", 1, "flops"))
    assert parse("2 * n") != parse("n * 2")
    assert hash(parse("2 * n")) == hash(parse("2 * n"))


@pytest.mark.parametrize("text", ["n / 0", "n // 0", "n % 0", "1 / (n - n)"])
def test_division_by_zero_is_infinite_cost(text: str) -> None:
    assert parse(text).evaluate({"n": 5}) == math.inf


def test_huge_values_overflow_to_inf_not_to_a_huge_int() -> None:
    e = parse(" * ".join(["n"] * 40))
    assert e.evaluate({"n": 10**300}) == math.inf
    assert parse("shape").evaluate({"shape": [10**200] * 3}) == math.inf


def test_missing_name_at_evaluation_is_a_key_error() -> None:
    with pytest.raises(KeyError, match="needs 'dtype_bytes'"):
        parse("n * dtype_bytes").evaluate({"n": 1})


def test_unknown_name_lists_the_allowed_names() -> None:
    with pytest.raises(ContractError) as info:
        parse("2 * m")
    err = info.value
    assert (err.path, err.line, err.key) == ("kernels.md", 42, "bytes_moved")
    assert "unknown name 'm' in '2 * m'; allowed names: dtype_bytes n outer_count shape" in err.reason


INJECTIONS = [
    ("__import__('os')", "a call"),
    ("__import__('os').system('true')", "a call"),
    ("n.real", "an attribute"),
    ("n.__class__.__mro__", "an attribute"),
    ("(lambda: 1)()", "a call"),
    ("lambda: 1", "a lambda"),
    ("[x for x in shape]", "ListComp"),
    ("{x for x in shape}", "SetComp"),
    ("(x for x in shape)", "GeneratorExp"),
    ("sum(shape)", "a call"),
    ("shape[0]", "a subscript"),
    ("2**99999999", "operator **"),
    ("n ** 2", "operator **"),
    ("n << 2", "operator LShift"),
    ("n & 1", "operator BitAnd"),
    ("n @ n", "operator MatMult"),
    ("~n", "operator ~"),
    ("not n", "operator not"),
    ("n < 2", "a comparison"),
    ("n and 1", "and/or"),
    ("n if n else 1", "IfExp"),
    ("True", "not a number"),
    ("None", "not a number"),
    ("'abc'", "not a number"),
    ("b'abc'", "not a number"),
    ("1j", "not a number"),
    ("...", "not a number"),
    ("f'{n}'", "JoinedStr"),
    ("(n := 1)", "NamedExpr"),
    ("[1, 2]", "List"),
    ("{'a': 1}", "Dict"),
    ("(1, 2)", "Tuple"),
]


@pytest.mark.parametrize(("text", "what"), INJECTIONS)
def test_refuses_everything_off_the_whitelist(text: str, what: str) -> None:
    with pytest.raises(ContractError) as info:
        parse(text)
    assert what in info.value.reason
    assert info.value.key == "bytes_moved"
    assert info.value.line == 42


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("1; import os", "invalid expression"),
        ("import os", "invalid expression"),
        ("2 * * n", "invalid expression"),
        ("n\nimport os", "invalid expression"),
        ("", "empty expression"),
        ("   ", "empty expression"),
        ("(" * 300 + "1" + ")" * 300, "invalid expression"),
    ],
)
def test_refuses_what_is_not_one_expression(text: str, what: str) -> None:
    with pytest.raises(ContractError, match=what):
        parse(text)


def test_refuses_huge_texts_before_parsing() -> None:
    text = "n + " * 10_000 + "n"
    start = time.perf_counter()
    with pytest.raises(ContractError, match=f"at most {MAX_TEXT} are accepted"):
        parse(text)
    assert time.perf_counter() - start < 10.0  # catches blow-ups, not speed


@pytest.mark.parametrize(
    "text",
    [
        "(" * (MAX_DEPTH + 5) + "n" + ")" * (MAX_DEPTH + 5) + " + " * 0 + "-" * (MAX_DEPTH + 1) + "n",
        "-" * (MAX_DEPTH + 1) + "n",
        " + ".join(["n"] * (MAX_DEPTH + 2)),
    ],
)
def test_refuses_deep_trees(text: str) -> None:
    with pytest.raises(ContractError, match=f"deeper than {MAX_DEPTH} levels"):
        parse(text)


def test_accepts_trees_up_to_the_depth_bound() -> None:
    assert parse(" + ".join(["n"] * (MAX_DEPTH - 1))).evaluate({"n": 1}) == MAX_DEPTH - 1


def test_refuses_a_non_string() -> None:
    with pytest.raises(ContractError, match="expected an expression text"):
        Expr.parse(5, NAMES, LOC)  # type: ignore[arg-type]


def test_module_never_calls_eval_exec_or_compile() -> None:
    tree = ast.parse(Path(expr_module.__file__).read_text(encoding="utf-8"))
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert not called & {"eval", "exec", "compile", "__import__"}


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_raises_only_contract_error(text: str) -> None:
    try:
        e = parse(text)
    except ContractError:
        return
    value = e.evaluate({"n": 3, "dtype_bytes": 4, "outer_count": 0, "shape": [2, 2]})
    assert isinstance(value, float)


_ATOMS = st.one_of(st.integers(0, 10**6).map(str),
                   st.sampled_from(["n", "dtype_bytes", "outer_count", "1.5"]))


@st.composite
def _expressions(draw: st.DrawFn, depth: int = 0) -> str:
    if depth > 6 or draw(st.booleans()):
        return draw(_ATOMS)
    op = draw(st.sampled_from(["+", "-", "*", "/", "//", "%"]))
    return f"({draw(_expressions(depth + 1))} {op} {draw(_expressions(depth + 1))})"


@settings(max_examples=200, deadline=None)
@given(_expressions())
def test_generated_arithmetic_is_accepted_and_evaluates_to_a_float(text: str) -> None:
    e = parse(text)
    assert e.names <= set(NAMES)
    assert isinstance(e.evaluate({"n": 3, "dtype_bytes": 4, "outer_count": 5}), float)
