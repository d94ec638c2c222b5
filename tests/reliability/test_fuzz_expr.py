"""Fuzzing the cost-expression evaluator (`lazyfuel.contracts.expr`) beyond tests/contracts/test_expr.py.

That file checks a list of injections and arbitrary short text. Here:
- random Python syntax trees of every expression kind (calls, attributes, lambdas, subscripts,
  comprehensions, walrus, f-strings, `**`, comparisons …), rendered with `ast.unparse`: `Expr.parse`
  accepts a text exactly when an independent whitelist walk of its tree does, within the text and
  depth bounds, and refuses everything else with a ContractError naming the key and line;
- refusals never run anything: a Python audit hook sees no `exec` and no `import` while texts are
  parsed, the evaluator is never entered, and texts over the length bound never reach `ast.parse`
  (so the work done on a refused text is bounded by construction, not measured by a clock);
- huge exponents (`9**9**9`), huge literals, very long and very deep inputs, and hostile Unicode
  (NUL, surrogates, BOM, lookalike letters) are refused or evaluate to a float, never a crash.
"""

from __future__ import annotations

import ast
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lazyfuel.contracts import expr as expr_module
from lazyfuel.contracts.expr import MAX_DEPTH, MAX_TEXT, Expr
from lazyfuel.contracts.model import ContractError, Location

from .fuzzing import fuzz

LOC = Location("fuzz.md", 7, "flops")
NAMES = ("n", "dtype_bytes", "outer_count", "shape")
ENV = {"n": 3, "dtype_bytes": 4, "outer_count": 5, "shape": [2, 3]}

# -- an audit hook that records what a parse makes Python do ----------------------------------------
_EVENTS: list[str] | None = None


def _audit(event: str, args: tuple) -> None:
    if _EVENTS is not None and event in ("exec", "import", "os.system", "subprocess.Popen", "open"):
        _EVENTS.append(event)


sys.addaudithook(_audit)  # hooks cannot be removed; this one records only inside `watched()`


@contextmanager
def watched() -> Iterator[list[str]]:
    """Record the audit events (exec, import, open, process) Python raises inside the block."""
    global _EVENTS
    _EVENTS = []
    try:
        yield _EVENTS
    finally:
        _EVENTS = None


# -- random syntax trees ---------------------------------------------------------------------------
_ALLOWED_BIN = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)
_ALL_BIN = (*_ALLOWED_BIN, ast.Pow, ast.LShift, ast.RShift, ast.BitOr, ast.BitXor, ast.BitAnd, ast.MatMult)
_ALL_UNARY = (ast.USub, ast.UAdd, ast.Not, ast.Invert)
_NAMES = st.sampled_from([*NAMES, "m", "__import__", "os", "eval", "self", "__builtins__", "True"])
_CONSTANTS = st.one_of(
    st.integers(0, 10**30), st.floats(allow_nan=False, allow_infinity=False, min_value=0),
    st.sampled_from([True, False, None, "x", b"x", 1j, Ellipsis, 9**9, 10**400 // 10**390]))


def _leaf() -> st.SearchStrategy[ast.expr]:
    return st.one_of(_NAMES.map(lambda n: ast.Name(n, ast.Load())), _CONSTANTS.map(ast.Constant))


def _extend(children: st.SearchStrategy[ast.expr]) -> st.SearchStrategy[ast.expr]:
    two = st.tuples(children, children)
    comp = [ast.comprehension(ast.Name("x", ast.Store()), ast.Name("shape", ast.Load()), [], 0)]
    return st.one_of(
        st.tuples(children, st.sampled_from(_ALL_BIN), children).map(
            lambda t: ast.BinOp(t[0], t[1](), t[2])),
        st.tuples(st.sampled_from(_ALL_UNARY), children).map(lambda t: ast.UnaryOp(t[0](), t[1])),
        st.tuples(children, st.lists(children, max_size=2)).map(lambda t: ast.Call(t[0], t[1], [])),
        children.map(lambda c: ast.Attribute(c, "__class__", ast.Load())),
        two.map(lambda t: ast.Subscript(t[0], t[1], ast.Load())),
        children.map(lambda c: ast.Lambda(ast.arguments([], [], None, [], [], None, []), c)),
        children.map(lambda c: ast.ListComp(c, comp)),
        children.map(lambda c: ast.GeneratorExp(c, comp)),
        children.map(lambda c: ast.NamedExpr(ast.Name("n", ast.Store()), c)),
        children.map(lambda c: ast.JoinedStr([ast.FormattedValue(c, -1, None)])),
        two.map(lambda t: ast.Compare(t[0], [ast.Lt()], [t[1]])),
        two.map(lambda t: ast.BoolOp(ast.And(), list(t))),
        st.tuples(children, children, children).map(lambda t: ast.IfExp(*t)),
        two.map(lambda t: ast.Tuple(list(t), ast.Load())),
        children.map(lambda c: ast.Starred(c, ast.Load())).map(lambda s: ast.List([s], ast.Load())),
    )


_TREES = st.recursive(_leaf(), _extend, max_leaves=12)


def _whitelisted(node: ast.AST, depth: int = 1) -> bool:
    """An independent statement of the whitelist (contracts.md: numbers, names, + - * / // %, parentheses)."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(node, ast.Constant):
        return type(node.value) in (int, float)
    if isinstance(node, ast.Name):
        return node.id in NAMES
    if isinstance(node, ast.BinOp):
        return (isinstance(node.op, _ALLOWED_BIN) and _whitelisted(node.left, depth + 1)
                and _whitelisted(node.right, depth + 1))
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, (ast.USub, ast.UAdd)) and _whitelisted(node.operand, depth + 1)
    return False


def _render(tree: ast.expr) -> str | None:
    try:
        return ast.unparse(ast.fix_missing_locations(ast.Expression(tree)))
    except (ValueError, RecursionError):
        return None  # not every generated tree has a text form (e.g. a starred call argument)


def _forbidden(*args, **kwargs):
    raise AssertionError("the evaluator ran during Expr.parse")


def _parse_refusing_evaluation(text: str) -> Expr:
    """`Expr.parse(text)`, failing the test if parsing entered the evaluator or made Python run code."""
    real = expr_module._eval
    expr_module._eval = _forbidden
    with watched() as events:
        try:
            return Expr.parse(text, NAMES, LOC)
        finally:
            expr_module._eval = real
            assert not events, f"parsing {text!r} made Python run {events}"


@fuzz(400)
@given(_TREES)
def test_random_syntax_trees_are_accepted_exactly_when_whitelisted(tree):
    text = _render(tree)
    if text is None:
        return
    reparsed = ast.parse(text, mode="eval").body
    allowed = len(text) <= MAX_TEXT and _whitelisted(reparsed)
    try:
        e = _parse_refusing_evaluation(text)
    except ContractError as err:
        assert not allowed, f"{text!r} follows the whitelist but was refused: {err}"
        assert (err.path, err.line, err.key) == ("fuzz.md", 7, "flops")
        assert err.reason
        return
    assert allowed, f"{text!r} is off the whitelist but was accepted"
    assert isinstance(e.evaluate(ENV), float)


POWERS = ["9**9**9", "9 ** 9 ** 9 ** 9", "(9**9)**9", "2**2**2**2**2**2", "n**n**n", "pow(9, 9**9)",
          "10**10**10 // 1", "-(9**9**9)", "n * 9**9**9", "n // (9**9**9)"]


@pytest.mark.parametrize("text", POWERS)
def test_huge_exponents_are_refused_without_being_computed(text):
    with pytest.raises(ContractError, match=r"operator \*\*|a call"):
        _parse_refusing_evaluation(text)


PAYLOADS = [
    "__import__('os').system('touch /tmp/lazyfuel-pwned')", "open('/etc/passwd').read()",
    "exec('import os')", "eval('1')", "compile('1', '', 'eval')", "globals()", "vars()",
    "().__class__.__bases__[0].__subclasses__()", "n.__class__.__init__.__globals__",
    "(lambda: __import__('os'))()", "[c for c in ().__class__.__base__.__subclasses__()]",
    "{k: v for k, v in {}.items()}", "(n := __import__('os'))", "f'{__import__(\"os\")}'",
    "shape[0]", "shape[::-1]", "*shape", "await n", "(yield n)", "n if n else __import__('os')",
    "breakpoint()", "getattr(n, 'real')", "type(n)", "n @ n", "n ^ n", "n < n < n",
]


@pytest.mark.parametrize("text", PAYLOADS)
def test_injection_payloads_are_refused_and_run_nothing(text):
    with pytest.raises(ContractError) as info:
        _parse_refusing_evaluation(text)
    assert info.value.key == "flops" and info.value.line == 7


@fuzz(100)
@given(st.integers(MAX_TEXT + 1, 200_000), st.sampled_from(["n + ", "(", "9**", "a", "\x00", "🙂"]))
def test_texts_over_the_length_bound_never_reach_the_python_parser(monkeypatch, length, unit):
    def no_parse(*args, **kwargs):
        raise AssertionError("ast.parse was called on a text over the length bound")

    monkeypatch.setattr(expr_module.ast, "parse", no_parse)
    text = (unit * (length // len(unit) + 1))[:length]
    with pytest.raises(ContractError, match=f"at most {MAX_TEXT} are accepted"):
        _parse_refusing_evaluation(text)


@fuzz(100)
@given(st.integers(MAX_DEPTH + 1, MAX_TEXT // 2), st.sampled_from(["-", "+", "n+", "n*", "n-(", "-(", "~"]))
def test_deep_inputs_within_the_length_bound_are_refused(depth, unit):
    """Deep unary chains, long sums and nested subtractions: refused by the depth bound (an
    iterative walk) or by Python's own parser limits, always as a ContractError."""
    closing = ")" * unit.count("(") * depth
    text = unit * depth + "n" + closing
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT]
    with pytest.raises(ContractError):
        _parse_refusing_evaluation(text)


@fuzz(200)
@given(st.text(alphabet=st.sampled_from(list("n+-*/%() .e0123456789_\t\r\n\x00\ufeff\ud800ｎ𝐧")),
               max_size=60))
def test_arithmetic_like_text_with_hostile_characters(text):
    try:
        e = _parse_refusing_evaluation(text)
    except ContractError as err:
        assert err.key == "flops" and err.reason
        return
    assert e.names <= set(NAMES)  # lookalike letters (NFKC) can only ever name allowed names
    assert isinstance(e.evaluate(ENV), float)


@fuzz(200)
@given(st.lists(st.one_of(st.integers(-10**400, 10**400), st.floats(), st.sampled_from(NAMES)),
                min_size=1, max_size=8),
       st.lists(st.sampled_from(["+", "-", "*", "/", "//", "%"]), min_size=7, max_size=7))
def test_accepted_arithmetic_on_extreme_numbers_is_a_cost_never_an_exception(atoms, ops):
    """Huge ints, inf, nan and negative literals: the value is a float; a cost that cannot be
    computed (overflow, 0/0, inf - inf) is never a Python exception."""
    parts = [repr(a) if not isinstance(a, str) else a for a in atoms]
    text = parts[0] + "".join(f" {op} ({p})" for op, p in zip(ops, parts[1:]))
    try:
        e = _parse_refusing_evaluation(text)
    except ContractError as err:
        assert "not allowed" in err.reason or "unknown name" in err.reason or "characters long" in err.reason
        assert any(w in text for w in ("inf", "nan")) or len(text) > MAX_TEXT, err
        return
    value = e.evaluate(ENV)
    assert isinstance(value, float)


def test_the_evaluator_never_returns_nan():
    """A cost the planner compares must be orderable: inf - inf and 0 * inf are infinitely expensive,
    not NaN (NaN compares false with everything and would win or lose a cost race at random)."""
    for text in ("1e999 - 1e999", "0 * 1e999", "1e999 % 3", "(1e999 - 1e999) * n"):
        value = Expr.parse(text, NAMES, LOC).evaluate(ENV)
        assert value == math.inf, (text, value)
