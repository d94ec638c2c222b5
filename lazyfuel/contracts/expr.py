"""Cost expressions: arithmetic over op-param fields, checked against a whitelist, never `eval`ed.

A contract's `flops` and `bytes_moved` are texts such as `"2 * n * dtype_bytes"`. `Expr.parse`
reads one with `ast.parse(mode="eval")` and accepts only numeric constants (int or float; not bool,
complex or str), names from the allowed set, the binary operators `+ - * / // %`, unary `-` and `+`,
and parentheses. Anything else (attributes, calls, subscripts, lambdas, comprehensions, `**`,
comparisons …) is refused with a `ContractError` naming the cost key. Texts longer than
`MAX_TEXT` characters and trees deeper than `MAX_DEPTH` are refused before they can cost time.

`Expr.evaluate` walks the checked tree in float arithmetic, so no input can build a huge integer.
A name bound to a sequence (a shape) stands for the product of its entries: an element count.
Division, floor division or modulo by zero evaluates to `math.inf`: a cost that cannot be computed
is treated as infinitely expensive, so the planner avoids the binding instead of crashing; a
result that is not a number (`1e999 - 1e999`) is infinite for the same reason.

`Expr.unsound_cost` probes an expression before it may price anything: every name at a few sizes
from 1 to 2**31 (all alike, and each one alone large or small), since a cost that is negative,
infinite or not a number for some size (`-1e300 * n`, `1e300 * 1e300 * n`, `n - 2`) would win or
lose every comparison whatever the work; documents are refused such costs at load.
"""

from __future__ import annotations

import ast
import math
import numbers
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from lazyfuel.contracts.model import Location

MAX_TEXT = 1000
MAX_DEPTH = 50

_BINARY: dict[type[ast.operator], tuple[str, Callable[[float, float], float]]] = {
    ast.Add: ("+", operator.add),
    ast.Sub: ("-", operator.sub),
    ast.Mult: ("*", operator.mul),
    ast.Div: ("/", operator.truediv),
    ast.FloorDiv: ("//", operator.floordiv),
    ast.Mod: ("%", operator.mod),
}
_UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
_ACCEPTED = "numbers, names, + - * / // %, unary - and +, parentheses"
PROBE_SIZES = (1, 2, 3, 1000, 2**20, 2**31)  # what `unsound_cost` binds names to

Value = int | float | Sequence[int]


@dataclass(frozen=True)
class Expr:
    """A checked cost expression. Equality is by `text`; `tree` is the validated AST."""

    text: str
    names: frozenset[str]
    tree: ast.expr = field(compare=False, repr=False)

    def __str__(self) -> str:
        return self.text

    @classmethod
    def parse(cls, text: str, allowed: Iterable[str], loc: Location) -> Expr:
        """Parse and check `text`; ContractError (at `loc`, key `loc.key`) if it breaks the whitelist.

        `allowed` is the set of names the expression may use (op-param fields, `dtype_bytes`, `n`).

        >>> Expr.parse("2 * n * dtype_bytes", ["n", "dtype_bytes"], Location()).evaluate(
        ...     {"n": [2, 3], "dtype_bytes": 4})
        48.0
        """
        if not isinstance(text, str):
            raise loc.error(f"expected an expression text, got {type(text).__name__}")
        if len(text) > MAX_TEXT:
            raise loc.error(f"expression is {len(text)} characters long; at most {MAX_TEXT} are accepted")
        if not text.strip():
            raise loc.error(f"empty expression; write a number or arithmetic ({_ACCEPTED})")
        try:
            tree = ast.parse(text.strip(), mode="eval").body
        except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
            detail = getattr(exc, "msg", None) or str(exc) or type(exc).__name__
            raise loc.error(f"invalid expression {text!r}: {detail}; accepted: {_ACCEPTED}") from None
        allowed_names = frozenset(allowed)
        names = _check(tree, text, allowed_names, loc)
        return cls(text.strip(), names, tree)

    def evaluate(self, env: Mapping[str, Value]) -> float:
        """The expression's value (a float) with each name bound by `env`.

        A sequence value counts as the product of its entries (an element count; `()` is 1).
        Division or modulo by zero gives `math.inf`, and so does a value that is not a number
        (`inf - inf`, `0 * inf`): costs are compared, and NaN compares false with everything.
        KeyError if `env` lacks a name.
        """
        value = _eval(self.tree, env, self.text)
        return math.inf if math.isnan(value) else value

    def unsound_cost(self) -> str | None:
        """Why this expression cannot be a cost (its first value that is negative, infinite or not
        a number, and where: see the module docstring), or None if every probe is finite, >= 0."""
        names = sorted(self.names)
        probes = [dict.fromkeys(names, v) for v in PROBE_SIZES]
        for name in names if len(names) > 1 else ():
            for alone, others in ((PROBE_SIZES[-2], 1), (1, PROBE_SIZES[-2])):
                probes.append({**dict.fromkeys(names, others), name: alone})
        for env in probes:
            value = _eval(self.tree, env, self.text)
            if not math.isfinite(value) or value < 0:
                at = ", ".join(f"{k} = {v}" for k, v in env.items()) or "any size"
                what = "not a number" if math.isnan(value) else value
                return f"{self.text!r} is {what} at {at}"
        return None


def _check(tree: ast.expr, text: str, allowed: frozenset[str], loc: Location) -> frozenset[str]:
    """Walk `tree` iteratively, refuse anything off the whitelist, and return the names used."""
    names: set[str] = set()
    stack: list[tuple[ast.AST, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise loc.error(f"expression nests deeper than {MAX_DEPTH} levels; simplify it")
        if isinstance(node, ast.Constant):
            if type(node.value) not in (int, float):
                raise loc.error(
                    f"constant {node.value!r} in {text!r} is not a number; only int and float "
                    "constants are accepted")
        elif isinstance(node, ast.Name):
            if node.id not in allowed:
                raise loc.error(
                    f"unknown name {node.id!r} in {text!r}; allowed names: {' '.join(sorted(allowed))}")
            names.add(node.id)
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            stack += [(node.left, depth + 1), (node.right, depth + 1)]
        elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            stack.append((node.operand, depth + 1))
        else:
            what = _describe(node)
            raise loc.error(f"{what} is not allowed in a cost expression ({text!r}); accepted: {_ACCEPTED}")
    return frozenset(names)


def _describe(node: ast.AST) -> str:
    if isinstance(node, ast.BinOp):
        return "operator " + ("**" if isinstance(node.op, ast.Pow) else type(node.op).__name__)
    if isinstance(node, ast.UnaryOp):
        return "operator " + ("~" if isinstance(node.op, ast.Invert) else "not")
    kinds = {
        ast.Attribute: "an attribute", ast.Call: "a call", ast.Subscript: "a subscript",
        ast.Lambda: "a lambda", ast.Compare: "a comparison", ast.BoolOp: "and/or",
    }
    for kind, words in kinds.items():
        if isinstance(node, kind):
            return words
    return type(node).__name__


def _eval(node: ast.expr, env: Mapping[str, Value], text: str) -> float:
    if isinstance(node, ast.Constant):
        return _to_float(node.value)
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise KeyError(f"cost expression {text!r} needs {node.id!r}; got {', '.join(sorted(env))}")
        value = env[node.id]
        if isinstance(value, numbers.Real):
            return _to_float(value)
        return _to_float(math.prod(int(v) for v in value))
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_eval(node.operand, env, text))
    if not isinstance(node, ast.BinOp):  # unreachable: the tree was checked by `_check`
        raise TypeError(f"unchecked node {type(node).__name__} in {text!r}")
    left, right = _eval(node.left, env, text), _eval(node.right, env, text)
    try:
        return _BINARY[type(node.op)][1](left, right)
    except ZeroDivisionError:
        return math.inf


def _to_float(value: float) -> float:
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf
