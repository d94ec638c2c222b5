"""Parsing and validating a pipeline graph into frozen, typed specs (nothing is built or run).

A graph (YAML) has these top-level keys:

    version: 1                     optional; the only version so far
    description: "…"               optional
    params: {rows: 131072}         optional numbers/strings; `lazyfuel run --set rows=…` overrides;
                                   used as `$rows`, `$(rows // 4)`, or `${rows}` inside a path;
                                   `threads` (dask's local thread count) is always defined
    limits: {memory: 96 MiB}       optional; the run fails if peak memory grows by more
    inputs:  {name: {KIND: …}, …}  KIND: zarr, npy, random, indices, mask, values (see inputs.py)
    steps:   [{name, op, <value args>, <params>}, …]   run in order; see `ops.OPS`
    outputs: [{value: name, zarr|npy: path}, …]        every output is also summarised

Every check raises `GraphError` naming the file, the line and the part (`step 'rows'`, …).
Paths are relative to the graph file. Step arguments are checked by kind here; shapes and
dtypes are checked by the API when `run.build` calls it (still before anything runs).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from dask.system import CPU_COUNT

from lazyfuel import publish
from lazyfuel.pipeline import inputs as input_kinds
from lazyfuel.pipeline.document import GraphError, Y, read
from lazyfuel.pipeline.fields import Scope, suggest
from lazyfuel.pipeline.ops import OPS, available_ops

# Params every graph has (a graph may redefine them): the threads dask's local schedulers use.
BUILTIN_PARAMS = {"threads": CPU_COUNT}
_TOP = ("version", "description", "params", "limits", "inputs", "steps", "outputs")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # with fullmatch ($ would allow a trailing newline)


@dataclass(frozen=True)
class InputSpec:
    """A named input: `kind` (zarr, npy, random, indices, mask, values) and its typed options."""

    name: str
    kind: str
    options: Any
    line: int


@dataclass(frozen=True)
class StepSpec:
    """One step: `op` applied to `values` (names of earlier values, or inline numpy arrays)."""

    name: str
    op: str
    values: Mapping[str, Any]
    params: Mapping[str, Any]
    line: int


@dataclass(frozen=True)
class OutputSpec:
    """An output: the value it takes and where it goes (`kind` summary, zarr or npy)."""

    value: str
    kind: str
    path: Path | None
    line: int


@dataclass(frozen=True)
class PipelineSpec:
    """A validated pipeline graph (a `graphs/*.yaml` file), nothing built yet. `path` is the file as
    given (errors print it)."""

    path: str
    description: str
    params: Mapping[str, Any]
    memory_limit: int | None
    inputs: tuple[InputSpec, ...]
    steps: tuple[StepSpec, ...]
    outputs: tuple[OutputSpec, ...]
    memory_limit_line: int = 0

    @property
    def name(self) -> str:
        return Path(self.path).name

    def line_of(self, value: str) -> int:
        """The line where the input or step named `value` is declared."""
        for item in (*self.inputs, *self.steps):
            if item.name == value:
                return item.line
        return 0


def load_graph(path: str | Path, overrides: Mapping[str, str] | None = None) -> PipelineSpec:
    """Read and validate the graph at `path`; `overrides` replace params (text, as from --set)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise GraphError(f"cannot read the graph: {err.strerror or err}", str(path)) from None
    except UnicodeDecodeError as err:
        raise GraphError(f"not a text file: byte {err.object[err.start]:#04x} at offset {err.start} is not "
                         "UTF-8; a graph is a YAML text file (graphs/*.yaml)", str(path)) from None
    return parse_graph(text, str(path), overrides, base=Path(path).resolve().parent)


def parse_graph(text: str, path: str = "<string>", overrides: Mapping[str, str] | None = None,
                base: Path | None = None) -> PipelineSpec:
    """Validate a graph's text; relative paths in it are taken from `base` (default: cwd)."""
    root = read(text, path)
    scope = Scope(path, "", {})
    top = scope.mapping(root, "the graph", ("inputs", "steps", "outputs"), _TOP)
    if "version" in top and top["version"].value != 1:
        raise scope.error(f"version {top['version'].value!r} is not supported; expected 1",
                          top["version"].line)
    description = top["description"].value if "description" in top else ""
    params = _params(scope.at("params"), top.get("params"), dict(overrides or {}), root.line)
    scope = Scope(path, "", params)
    base = base if base is not None else Path.cwd()
    memory = _limits(scope.at("limits"), top["limits"]) if "limits" in top else None
    memory_line = top["limits"].line if "limits" in top else 0
    inputs = _inputs(scope, top["inputs"], base)
    steps = _steps(scope, top["steps"], {i.name: i.line for i in inputs})
    outputs = _outputs(scope.at("outputs"), top["outputs"], [*(i.name for i in inputs),
                                                           *(s.name for s in steps)], base)
    _check_places(scope.at("outputs"), inputs, outputs)
    return PipelineSpec(path, str(description or ""), params, memory, inputs, steps, outputs, memory_line)


def _check_places(scope: Scope, inputs: tuple[InputSpec, ...], outputs: tuple[OutputSpec, ...]) -> None:
    """GraphError for an output written where an input is read, or where another output goes:
    compared as the file system sees them (`publish.same_place`: symlinks, `..`, hard links)."""
    sources = [(i.name, i.kind, p) for i in inputs if (p := getattr(i.options, "path", None)) is not None]
    for n, out in enumerate(outputs):
        if out.path is None:
            continue
        for name, kind, path in sources:
            if publish.same_place(out.path, path):
                raise scope.error(f"{out.kind}: output {out.value!r} would write {out.path}, the same place "
                                  f"as input {name!r} ({kind}: {path}{_real_note(path)}), which it reads; "
                                  "write the output elsewhere", out.line)
        for other in outputs[:n]:
            if other.path is not None and publish.same_place(out.path, other.path):
                raise scope.error(f"{out.kind}: output {out.value!r} would write {out.path}, the same place "
                                  f"as output {other.value!r} (line {other.line}: {other.kind}: {other.path}"
                                  f"{_real_note(other.path)}); give each output its own path", out.line)


def _real_note(path: Path) -> str:
    """', which is PATH' when symlinks make `path` another place."""
    real = publish.real_path(path)
    return f", which is {real}" if real != path else ""


def _params(scope: Scope, y: Y | None, overrides: dict[str, str], line: int) -> dict[str, Any]:
    if y is not None and not y.is_map:
        raise scope.error("params must be a mapping of names to numbers or strings", y.line)
    declared = dict(y.value) if y is not None else {}
    for name in overrides:
        if name not in declared:
            known = ", ".join(declared) or "none"
            raise GraphError(f"--set {name}: the graph has no param {name!r}; params: {known}"
                             f"{suggest(name, declared)}", scope.path, y.line if y is not None else line)
    params: dict[str, Any] = dict(BUILTIN_PARAMS)
    for name, node in declared.items():
        if not _NAME.fullmatch(name):
            raise scope.error(f"param name {name!r} is not an identifier", y.key_lines[name])
        if node.is_map or node.is_list:
            raise scope.error(f"param {name!r} must be a number or a string", node.line)
        value = _from_text(overrides[name]) if name in overrides else node.value
        params[name] = Scope(scope.path, scope.context, params).resolve(Y(value, node.line))
    return params


def _from_text(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _limits(scope: Scope, y: Y) -> int | None:
    fields = scope.mapping(y, "limits", (), ("memory",))
    return scope.size_bytes(fields["memory"], "memory") if "memory" in fields else None


def _check_name(scope: Scope, name: str, line: int, seen: dict[str, int]) -> None:
    if not _NAME.fullmatch(name):
        raise scope.error(f"{name!r} is not a valid name (letters, digits and _, not starting with a digit)",
                          line)
    if name in seen:
        raise scope.error(f"the name {name!r} is already used (line {seen[name]}); names of inputs and "
                          "steps must be unique", line)


def _inputs(scope: Scope, y: Y, base: Path) -> tuple[InputSpec, ...]:
    entries = scope.at("inputs").mapping(y, "inputs", (), y.value.keys() if y.is_map else ())
    if not entries:
        raise scope.at("inputs").error("inputs is empty; declare at least one input", y.line)
    seen: dict[str, int] = {}
    specs = []
    for name, node in entries.items():
        line = y.key_lines[name]
        _check_name(scope.at("inputs"), name, line, seen)
        seen[name] = line
        kind, options = input_kinds.parse(scope.at(f"input {name!r}"), node, base)
        specs.append(InputSpec(name, kind, options, line))
    return tuple(specs)


def _steps(scope: Scope, y: Y, seen: dict[str, int]) -> tuple[StepSpec, ...]:
    if not y.is_list or not y.value:
        raise scope.at("steps").error("steps must be a non-empty list of steps", y.line)
    all_names = {}
    for node in y.value:
        if node.is_map and isinstance(node.value.get("name", Y(None, 0)).value, str):
            all_names.setdefault(node.value["name"].value, node.line)
    seen = dict(seen)
    steps = []
    for index, node in enumerate(y.value):
        steps.append(_step(scope, node, index, seen, all_names))
        seen[steps[-1].name] = node.line
    return tuple(steps)


def _step(scope: Scope, node: Y, index: int, seen: dict[str, int], later: dict[str, int]) -> StepSpec:
    s = scope.at(f"step {index + 1}")
    if not node.is_map:
        raise s.error("a step must be a mapping with name, op and its arguments", node.line)
    fields = dict(node.value)
    if "name" not in fields:
        raise s.error("the step lacks 'name' (the name of its result)", node.line)
    name = s.string(fields.pop("name"), "name")
    s = scope.at(f"step {name!r}", step=name)
    _check_name(s, name, node.key_lines["name"], seen)
    if "op" not in fields:
        raise s.error(f"the step lacks 'op'; expected one of {', '.join(available_ops())}", node.line)
    op_name = s.string(fields.pop("op"), "op")
    op = OPS.get(op_name)
    if op is None:
        raise s.error(f"unknown op {op_name!r}; expected one of {', '.join(available_ops())}"
                      f"{suggest(op_name, OPS)}", node.key_lines["op"])
    if not op.available:
        raise s.error(f"op {op_name!r} needs lazyfuel.{op.needs}, which this lazyfuel lacks (the FFT "
                      "family is not installed)", node.key_lines["op"])
    for key in fields:
        if key not in op.keys:
            raise s.error(f"{op_name} takes no argument {key!r}; it takes {', '.join(op.keys)}"
                          f"{suggest(key, op.keys)}", node.key_lines[key])
    missing = [k for k in (*op.values, *(p for p, d in op.params.items() if d.required)) if k not in fields]
    if missing:
        raise s.error(f"{op_name} needs {', '.join(repr(k) for k in missing)}; it takes {', '.join(op.keys)}",
                      node.line)
    values = {k: _value_ref(s, fields[k], k, seen, later) for k in op.values}
    params = {k: (p.read(s, fields[k], k) if k in fields else p.default) for k, p in op.params.items()}
    return StepSpec(name, op_name, values, params, node.line)


def _value_ref(s: Scope, y: Y, key: str, seen: dict[str, int], later: dict[str, int]) -> Any:
    """A value argument: the name of an input or earlier step, or an inline list of numbers."""
    if y.is_list:
        data = y.plain()
        try:
            return np.asarray(data)
        except ValueError:
            raise s.error(f"{key}: the inline list is ragged; rows must have equal lengths", y.line) from None
    name = s.string(y, key)
    if name in seen:
        return name
    if name in later:
        raise s.error(f"{key}: {name!r} is the result of a later step (line {later[name]}); steps run in "
                      "order", y.line)
    raise s.error(f"{key}: no input or earlier step is named {name!r}; defined so far: "
                  f"{', '.join(seen)}{suggest(name, seen)}", y.line)


def _join(base: Path, relative: str) -> Path:
    """`relative` taken from the graph's folder, with `..` folded away."""
    return Path(os.path.normpath(base / relative))


def _outputs(scope: Scope, y: Y, names: list[str], base: Path) -> tuple[OutputSpec, ...]:
    if not y.is_list or not y.value:
        raise scope.error("outputs must be a non-empty list like [{value: NAME}, {value: NAME, zarr: PATH}]",
                          y.line)
    outputs = []
    for node in y.value:
        if isinstance(node.value, str):  # shorthand: a bare name is a summary output
            node = Y({"value": node}, node.line, {"value": node.line})
        fields = scope.mapping(node, "an output", ("value",), ("zarr", "npy", "summary"))
        name = scope.string(fields["value"], "value")
        if name not in names:
            raise scope.error(f"value: no input or step is named {name!r}; names: {', '.join(names)}"
                              f"{suggest(name, names)}", fields["value"].line)
        stores = [k for k in ("zarr", "npy") if k in fields]
        if len(stores) > 1:
            raise scope.error("an output goes to one place: zarr or npy, not both (add a second output)",
                              node.line)
        if "summary" in fields and not scope.boolean(fields["summary"], "summary"):
            raise scope.error("summary: false is not supported; every output is summarised",
                              fields["summary"].line)
        kind = stores[0] if stores else "summary"
        path = _join(base, scope.string(fields[kind], kind)) if stores else None
        if kind == "npy" and path is not None and path.suffix != ".npy":
            raise scope.error(f"npy: the path must end in .npy, got {path.name!r}", fields[kind].line)
        outputs.append(OutputSpec(name, kind, path, node.line))
    return tuple(outputs)
