"""Typed fields of a graph: ints, shapes, dtypes, chunks, sizes, paths, with `params` substituted.

A `Scope` knows the file, what part of the graph it reads ("step 'rows'", "input 'table'") and
the graph's params; each reader converts one `Y` node or raises a `GraphError` at its line.

Params: a scalar written `$rows` is the param's value; `$(rows // 4)` is an integer expression
over params (numbers, names of numeric params, + - * / // %, parentheses; parsed with `ast`
against that whitelist, never `eval`; at most `MAX_TEXT` characters and `MAX_DEPTH` levels, the
bounds of the contracts' cost expressions, so a refused one costs no work); `${rows}` inside a
longer string (a path) is replaced by its text.
"""

from __future__ import annotations

import ast
import difflib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from lazyfuel.contracts.expr import MAX_DEPTH, MAX_TEXT
from lazyfuel.dtypes import DType
from lazyfuel.pipeline.document import GraphError, Y

DTYPES: dict[str, np.dtype] = {d.numpy.name: d.numpy for d in DType}  # numpy's names: "float32" …
_DTYPE_ALIASES = {d.suffix: d.numpy.name for d in DType if d.suffix != d.numpy.name}  # "f32" …
_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_WHOLE = re.compile(r"^\$(?:([A-Za-z_]\w*)|\((.*)\))$", re.S)
_INNER = re.compile(r"\$\{([A-Za-z_]\w*)\}")
_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b}


def suggest(word: str, choices: Iterable[str]) -> str:
    """' (did you mean 'x'?)' when a choice is close to `word`, else ''."""
    close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


@dataclass(frozen=True)
class Scope:
    """Reads fields of one part of a graph; errors name `path`, the node's line and `context`."""

    path: str
    context: str
    params: Mapping[str, Any]
    step: str | None = None

    def error(self, reason: str, line: int) -> GraphError:
        return GraphError(reason, self.path, line, self.context, self.step)

    def at(self, context: str, step: str | None = None) -> Scope:
        """The same file and params, for another part of the graph."""
        return Scope(self.path, context, self.params, step)

    # -- mappings ---------------------------------------------------------------------------------
    def mapping(self, y: Y, what: str, required: Iterable[str] = (), optional: Iterable[str] = ()
                ) -> dict[str, Y]:
        """`y` as a dict; refuses keys outside required + optional and reports missing ones."""
        if not y.is_map:
            raise self.error(f"{what} must be a mapping, got {_shown(y)}", y.line)
        required = list(required)
        allowed = required + [k for k in optional if k not in required]
        for key in y.value:
            if key not in allowed:
                raise self.error(f"unknown key {key!r} in {what}; expected one of {', '.join(allowed)}"
                                 f"{suggest(key, allowed)}", y.key_lines[key])
        missing = [k for k in required if k not in y.value]
        if missing:
            raise self.error(f"{what} lacks {', '.join(repr(k) for k in missing)}", y.line)
        return dict(y.value)

    # -- scalars ----------------------------------------------------------------------------------
    def resolve(self, y: Y) -> Any:
        """A scalar with params applied: `$name`, `$(expr)`, or `${name}` inside a string."""
        value = y.value
        if not isinstance(value, str) or "$" not in value:
            return value
        whole = _WHOLE.match(value.strip())
        if whole:
            name, expr = whole.groups()
            if name is not None:
                return self._param(name, y.line)
            return self._expr(expr, y.line)
        return _INNER.sub(lambda m: str(self._param(m.group(1), y.line)), value)

    def _param(self, name: str, line: int) -> Any:
        if name not in self.params:
            known = ", ".join(sorted(self.params)) or "none are defined"
            raise self.error(f"unknown param {name!r}; params: {known}{suggest(name, self.params)}", line)
        return self.params[name]

    def _expr(self, text: str, line: int) -> Any:
        if len(text) > MAX_TEXT:
            raise self.error(f"the expression $(…) is {len(text)} characters long; at most {MAX_TEXT} are "
                             "accepted", line)
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            raise self.error(f"cannot parse the expression $({text})", line) from None

        def ev(node: ast.AST, depth: int = 0) -> Any:
            if depth > MAX_DEPTH:
                raise self.error(f"$({text}) nests deeper than {MAX_DEPTH} levels; simplify it", line)
            if isinstance(node, ast.Expression):
                return ev(node.body, depth + 1)
            if isinstance(node, ast.Constant) and type(node.value) in (int, float):
                return node.value
            if isinstance(node, ast.Name):
                value = self._param(node.id, line)
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise self.error(f"$({text}): param {node.id!r} is {value!r}, not a number", line)
                return value
            if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
                v = ev(node.operand, depth + 1)
                return -v if isinstance(node.op, ast.USub) else v
            if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
                a, b = ev(node.left, depth + 1), ev(node.right, depth + 1)
                if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and b == 0:
                    raise self.error(f"division by zero in $({text})", line)
                return _BINOPS[type(node.op)](a, b)
            raise self.error(f"$({text}): only numbers, params, + - * / // % and parentheses are "
                             "allowed", line)

        value = ev(tree)
        if not isinstance(value, (int, float)):
            raise self.error(f"$({text}) is not a number", line)
        return int(value) if isinstance(value, float) and value.is_integer() else value

    def integer(self, y: Y, key: str, minimum: int | None = None) -> int:
        v = self.resolve(y)
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.error(f"{key} must be an integer, got {v!r}", y.line)
        if minimum is not None and v < minimum:
            raise self.error(f"{key} must be >= {minimum}, got {_number_text(v)}", y.line)
        return v

    def number(self, y: Y, key: str) -> int | float | bool | complex:
        v = self.resolve(y)
        if not isinstance(v, (int, float, bool)):
            raise self.error(f"{key} must be a number (or true/false), got {_number_text(v)}", y.line)
        return v

    def fraction(self, y: Y, key: str) -> float:
        v = self.number(y, key)
        if isinstance(v, bool) or not 0 <= v <= 1:  # compared as given: float() of a huge int overflows
            raise self.error(f"{key} must be a number from 0 to 1, got {_number_text(v)}", y.line)
        return float(v)

    def boolean(self, y: Y, key: str) -> bool:
        v = self.resolve(y)
        if not isinstance(v, bool):
            raise self.error(f"{key} must be true or false, got {v!r}", y.line)
        return v

    def string(self, y: Y, key: str) -> str:
        v = self.resolve(y)
        if not isinstance(v, str) or not v:
            raise self.error(f"{key} must be a non-empty string, got {_shown(y)}", y.line)
        return v

    def choice(self, y: Y, key: str, choices: Iterable[str]) -> str:
        choices = list(choices)
        v = self.string(y, key)
        if v not in choices:
            raise self.error(f"{key}: unknown value {v!r}; expected one of {', '.join(choices)}"
                             f"{suggest(v, choices)}", y.line)
        return v

    # -- compound ---------------------------------------------------------------------------------
    def integers(self, y: Y, key: str, minimum: int | None = None) -> tuple[int, ...]:
        if not y.is_list:
            raise self.error(f"{key} must be a list of integers, got {_shown(y)}", y.line)
        return tuple(self.integer(item, key, minimum) for item in y.value)

    def shape(self, y: Y, key: str = "shape") -> tuple[int, ...]:
        if not y.is_list and isinstance(self.resolve(y), int):
            return (self.integer(y, key, 0),)
        return self.integers(y, key, 0)

    def dtype(self, y: Y, key: str = "dtype") -> np.dtype:
        name = self.string(y, key)
        name = _DTYPE_ALIASES.get(name.lower(), name.lower())
        if name not in DTYPES:
            raise self.error(f"{key}: unknown dtype {self.resolve(y)!r}; expected one of "
                             f"{', '.join(DTYPES)}{suggest(name, DTYPES)}", y.line)
        return DTYPES[name]

    def chunks(self, y: Y, ndim: int, key: str = "chunks") -> Any:
        """'auto', one int for every axis, or a list with an int (or 'auto') per axis."""
        v = self.resolve(y)
        if v == "auto":
            return "auto"
        if not y.is_list:
            return self.integer(y, key, 1)
        if len(y.value) != ndim:
            raise self.error(f"{key} has {len(y.value)} entries; expected {ndim} (one per axis)", y.line)
        return tuple("auto" if self.resolve(c) == "auto" else self.integer(c, key, 1) for c in y.value)

    def size_bytes(self, y: Y, key: str) -> int:
        """A size: bytes, or a number and a unit: '96 MiB', '1.5 GB', '$(64 + 24 * threads) MiB'."""
        v = self.resolve(y)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
        scaled = re.fullmatch(r"\s*\$\((.*)\)\s*([A-Za-z]+)\s*", str(v), re.S)
        if scaled and scaled.group(2).lower() in _UNITS:
            amount, unit = self._expr(scaled.group(1), y.line), scaled.group(2)
        else:
            m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]+)\s*", str(v))
            if not m or m.group(2).lower() not in _UNITS:
                raise self.error(f"{key} must be a size like '512 MiB' or a number of bytes, got {v!r}",
                                 y.line)
            amount, unit = float(m.group(1)), m.group(2)
        size = amount * _UNITS[unit.lower()]
        if not (math.isfinite(size) and size >= 1):
            raise self.error(f"{key} must be a positive, finite size, got {amount} {unit}", y.line)
        return int(size)


def _number_text(v: object) -> str:
    """`v` for a message: repr, but an integer too long to print whole named by its size."""
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 64:
        return f"an integer of {v.bit_length()} bits"
    return repr(v)


def _shown(y: Y) -> str:
    if y.is_map:
        return "a mapping"
    if y.is_list:
        return "a list"
    return repr(y.value)
