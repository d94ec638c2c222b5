"""Reading a pipeline graph's YAML into nodes that remember their line.

`read(text, path)` composes the document with `yaml.compose(..., Loader=yaml.SafeLoader)` (never an
unsafe loader) and turns it into `Y` nodes: scalars, lists and string-keyed dicts, each with the
1-based line it starts on (and, for a dict, the line of each key). It refuses what a graph never
needs and what would make a line ambiguous: aliases and anchors, tags other than the YAML core
types, duplicate keys, non-string keys and several documents in one file.

Every problem is a `GraphError` with `.path .line .context .reason`, printed as
`quickstart.yaml:14: step 'rows': unknown op 'gathr'; …`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml


class GraphError(ValueError):
    """A pipeline graph is malformed, or one of its steps fails to build.

    `.path` the graph file, `.line` (1-based; 0 when unknown), `.context` what the line belongs to
    ("step 'rows'", "input 'table'", "outputs", …; may be empty), `.step` the step's name when the
    problem is in a step, `.reason` the message without the location.
    """

    def __init__(self, reason: str, path: str = "<string>", line: int = 0, context: str = "",
                 step: str | None = None) -> None:
        self.path, self.line, self.context, self.step, self.reason = path, line, context, step, reason
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {context}: {reason}" if context else f"{where}: {reason}")


@dataclass(frozen=True)
class Y:
    """One YAML node: `value` is a scalar, a list of `Y` or a dict of str -> `Y`; `line` 1-based."""

    value: Any
    line: int
    key_lines: dict[str, int] = field(default_factory=dict)

    @property
    def is_map(self) -> bool:
        return isinstance(self.value, dict)

    @property
    def is_list(self) -> bool:
        return isinstance(self.value, list)

    def plain(self) -> Any:
        """The value with every nested `Y` unwrapped (lists and dicts of plain values)."""
        if self.is_map:
            return {k: v.plain() for k, v in self.value.items()}
        if self.is_list:
            return [v.plain() for v in self.value]
        return self.value


_CORE = "tag:yaml.org,2002:"
_SCALARS = {f"{_CORE}{name}": f"construct_yaml_{name}" for name in ("str", "int", "float", "bool", "null")}


def read(text: str, path: str) -> Y:
    """The document in `text` as `Y` nodes; GraphError (with the line) for anything refused."""
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise GraphError("YAML anchors and aliases are not allowed in a graph; write the value out",
                                 path, event.start_mark.line + 1)
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = mark.line + 1 if mark is not None else 0
        problem = (err.problem or "malformed YAML").strip()
        if err.context and err.context_mark is not None and err.context_mark is not mark:
            problem += f" ({err.context} on line {err.context_mark.line + 1})"
        raise GraphError(f"YAML syntax: {problem}", path, line) from None
    except yaml.reader.ReaderError as err:  # a character YAML refuses (control characters, NUL …)
        line = text.count("\n", 0, err.position) + 1
        code = err.character if isinstance(err.character, int) else ord(err.character)  # pyyaml: its ord
        raise GraphError(f"character {chr(code)!r} (U+{code:04X}) is not allowed in YAML; remove it or write "
                         "it as an escape inside a double-quoted string", path, line) from None
    if root is None:
        raise GraphError("the graph is empty; expected a mapping with inputs, steps and outputs", path, 1)
    return _convert(root, path, yaml.SafeLoader(""))


def _convert(node: yaml.Node, path: str, loader: yaml.SafeLoader) -> Y:
    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        if node.tag != f"{_CORE}map":
            raise GraphError(f"YAML tag {node.tag!r} is not allowed; use a plain mapping", path, line)
        items: dict[str, Y] = {}
        key_lines: dict[str, int] = {}
        for key_node, value_node in node.value:
            key_line = key_node.start_mark.line + 1
            if key_node.tag == f"{_CORE}merge":
                raise GraphError("YAML merge keys ('<<') are not allowed in a graph", path, key_line)
            key = _convert(key_node, path, loader).value
            if not isinstance(key, str):
                raise GraphError(f"keys must be names (strings), got {key!r}", path, key_line)
            if key in items:
                raise GraphError(f"duplicate key {key!r} (first on line {key_lines[key]})", path, key_line)
            items[key] = _convert(value_node, path, loader)
            key_lines[key] = key_line
        return Y(items, line, key_lines)
    if isinstance(node, yaml.SequenceNode):
        if node.tag != f"{_CORE}seq":
            raise GraphError(f"YAML tag {node.tag!r} is not allowed; use a plain list", path, line)
        return Y([_convert(item, path, loader) for item in node.value], line)
    method = _SCALARS.get(node.tag)
    if method is None:
        raise GraphError(f"YAML tag {node.tag!r} is not allowed; graphs hold strings, numbers, "
                         "booleans and null", path, line)
    try:
        return Y(getattr(loader, method)(node), line)
    except ValueError as err:  # e.g. an integer of more digits than Python converts (4300)
        raise GraphError(f"the value {node.value[:20]!r}... cannot be read: {err}", path, line) from None
