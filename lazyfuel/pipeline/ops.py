"""The ops a graph step may name, what each takes, and how it calls the public API.

Each `OpDef` lists its value arguments (names of inputs or earlier steps, or an inline list) and
its parameters with a reader (`fields.Scope` method) and a default; `call` builds the lazy result
through `lazyfuel`'s public functions only. The FFT family is offered when `lazyfuel` has it
(`hasattr(lf, "rfft")`); a graph naming it otherwise gets an error saying so. An op whose graph
module declares its builder (`lf.OP_FUNCTIONS`: `lf.flip`) is a step too, its parameters read by
their annotation (`_READERS`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import lazyfuel as lf
from lazyfuel.pipeline.document import Y
from lazyfuel.pipeline.fields import Scope

_REQUIRED = object()
Reader = Callable[[Scope, Y, str], Any]


@dataclass(frozen=True)
class Param:
    """A step parameter: how to read it and its default (`REQUIRED` when it has none)."""

    read: Reader
    default: Any = _REQUIRED

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED


@dataclass(frozen=True)
class OpDef:
    """One op: value arguments (the first is the data), parameters, and the API call."""

    name: str
    values: tuple[str, ...]
    params: Mapping[str, Param]
    call: Callable[..., lf.Array]
    doc: str
    needs: str | None = None  # an attribute of `lazyfuel` the op needs (the FFT family)
    keys: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "keys", (*self.values, *self.params))

    @property
    def available(self) -> bool:
        return self.needs is None or hasattr(lf, self.needs)


def _int(s: Scope, y: Y, key: str) -> int:
    return s.integer(y, key)


def _axes(s: Scope, y: Y, key: str) -> tuple[int, ...] | None:
    return None if y.value is None else s.integers(y, key)


def _shape(s: Scope, y: Y, key: str) -> tuple[int, ...]:
    return s.shape(y, key)


def _fill(s: Scope, y: Y, key: str) -> Any:
    return s.number(y, key)


def _opt_int(s: Scope, y: Y, key: str) -> int | None:
    return None if y.value is None else s.integer(y, key, 1)


def _norm(s: Scope, y: Y, key: str) -> str | None:
    return None if y.value is None else s.choice(y, key, ("backward", "ortho", "forward"))


def _index(s: Scope, y: Y, key: str) -> tuple[Any, ...]:
    """A basic index: a string in numpy's syntax ('::2, 1:', '..., 0') or a list of its parts."""
    parts = [s.resolve(p) for p in y.value] if y.is_list else str(s.resolve(y)).split(",")
    if parts == [""]:
        raise s.error(f"{key} is empty; write e.g. '::2, 1:'", y.line)
    return tuple(_index_part(s, y, key, p) for p in parts)


def _index_part(s: Scope, y: Y, key: str, part: Any) -> Any:
    if isinstance(part, int) and not isinstance(part, bool):
        return part
    text = str(part).strip()
    if text == "...":
        return Ellipsis
    bounds = text.split(":")
    if len(bounds) > 3:
        raise s.error(f"{key}: {text!r} is not an int, a slice a:b:c or '...'", y.line)
    try:
        numbers = [int(b) if b.strip() else None for b in bounds]
    except ValueError:
        raise s.error(f"{key}: {text!r} is not an int, a slice a:b:c or '...'", y.line) from None
    if len(numbers) == 1:
        return numbers[0] if numbers[0] is not None else slice(None)
    if len(numbers) == 3 and numbers[2] == 0:
        raise s.error(f"{key}: {text!r} has a step of 0", y.line)
    return slice(*numbers)


def _fft(name: str) -> Callable[..., lf.Array]:
    def call(x: Any, axis: int, n: int | None, norm: str | None) -> lf.Array:
        kwargs: dict[str, Any] = {"axis": axis}
        if n is not None:
            kwargs["n"] = n
        if norm is not None:
            kwargs["norm"] = norm
        return getattr(lf, name)(x, **kwargs)
    return call


_FFT_PARAMS = {"axis": Param(_int, -1), "n": Param(_opt_int, None), "norm": Param(_norm, None)}

_OPS = [
    OpDef("index_select", ("x", "indices"), {"dim": Param(_int)},
          lambda x, indices, dim: lf.index_select(x, dim, indices),
          "slices of x along dim at 1-d indices"),
    OpDef("gather", ("x", "indices"), {"dim": Param(_int)},
          lambda x, indices, dim: lf.gather(x, dim, indices),
          "elements of x picked along dim by indices of x's rank"),
    OpDef("masked_fill", ("x", "mask"), {"value": Param(_fill)},
          lambda x, mask, value: lf.masked_fill(x, mask, value),
          "value where the bool mask is true, x elsewhere"),
    OpDef("transpose", ("x",), {"axes": Param(_axes, None)},
          lambda x, axes: lf.transpose(x, axes), "axes permuted (a view)"),
    OpDef("slice", ("x",), {"index": Param(_index)},
          lambda x, index: lf.asarray(x)[index], "basic indexing, e.g. index: '::2, 1:' (a view)"),
    OpDef("getitem", ("x",), {"index": Param(_index)},
          lambda x, index: lf.asarray(x)[index], "the same as slice"),
    OpDef("broadcast_to", ("x",), {"shape": Param(_shape)},
          lambda x, shape: lf.broadcast_to(x, shape), "x stretched to shape (a stride-0 view)"),
    OpDef("contiguous", ("x",), {}, lambda x: lf.contiguous(x), "an explicit Contiguize"),
    *(OpDef(name, ("x",), _FFT_PARAMS, _fft(name), f"numpy.fft.{name} along axis", needs=name)
      for name in ("fft", "ifft", "rfft", "irfft")),
]

# how a parameter of a declared op's function is read, by its annotation
_READERS: dict[str, Reader] = {"int": _int, "int | None": _opt_int, "float": _fill}


def _declared(name: str, function: Callable[..., lf.Array]) -> OpDef:
    """The step of a declared op: `x`, then the function's parameters (TypeError naming a parameter
    whose annotation has no reader, with those that have)."""
    params: dict[str, Param] = {}
    for p in list(inspect.signature(function).parameters.values())[1:]:
        reader = _READERS.get(str(p.annotation))
        if reader is None:
            raise TypeError(f"op {name}: parameter {p.name!r} is annotated {p.annotation!r}; a graph "
                            f"step reads parameters annotated {' or '.join(map(repr, _READERS))}")
        params[p.name] = Param(reader) if p.default is p.empty else Param(reader, p.default)
    doc = (function.__doc__ or name).strip().splitlines()[0]
    return OpDef(name, ("x",), params, lambda x, **kwargs: function(x, **kwargs), doc)


_OPS += [_declared(name, function) for name, function in lf.OP_FUNCTIONS.items()]
OPS: dict[str, OpDef] = {op.name: op for op in _OPS}


def available_ops() -> list[str]:
    """Names of the ops this lazyfuel can run, sorted."""
    return sorted(name for name, op in OPS.items() if op.available)
