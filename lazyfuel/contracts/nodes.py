"""Safe YAML composition and strict, line-aware reading of the composed nodes.

`compose` turns one YAML section of a document (front matter or a ```fkc block) into a node tree
with line marks, through the safe loader only: anchors and aliases (alias bombs), nesting deeper
than `MAX_DEPTH`, non-printable characters and multi-document streams are refused before or
while composing, and every YAML error becomes a `ContractError` at its document line. Nothing is
ever constructed from a tag: scalars are read from their text by `Section`.

`Section` reads nodes strictly (torchgen style): `mapping` refuses unknown and duplicate keys and
names the keys allowed; `Entries.pop` fails on a missing key; scalar readers check the type and
say what was expected and what was got. Every error carries the document path, the 1-based line
in the whole document and the key.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass

import yaml
from yaml.constructor import SafeConstructor

from lazyfuel.contracts.model import ContractError, Location

MAX_DEPTH = 32
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_TAG = "tag:yaml.org,2002:"
_CONSTRUCT = SafeConstructor()
_STANDARD_TAGS = frozenset({"str", "int", "float", "bool", "null", "seq", "map"})
# What YAML's reader refuses, plus the Unicode line breaks that would shift its line numbers.
_REFUSED_CHARS = re.compile(
    "[^\x09\x0a\x0d\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_KEY_AT = re.compile(r"^\s*-?\s*([A-Za-z_][\w\-.]*)\s*:")


def key_on(line: str) -> str:
    """The key a document line declares (`""` if none): used to name the key of a YAML error."""
    match = _KEY_AT.match(line)
    return match[1] if match else ""


def compose(text: str, path: str, first_line: int) -> yaml.Node | None:
    """Compose `text` (a section starting at document line `first_line`) safely; ContractError if bad."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if (bad := _REFUSED_CHARS.search(line)) is not None:
            raise ContractError(
                f"character U+{ord(bad.group()):04X} at column {bad.start() + 1} is not allowed in YAML; "
                "remove it or write it as an escape inside a double-quoted string",
                path, first_line + i, key_on(line))
    try:
        _refuse_references(text, path, first_line, lines)
        return yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        index = min(mark.line, len(lines) - 1) if mark is not None else 0
        problem = " ".join(str(p) for p in (exc.context, exc.problem) if p)
        raise ContractError(f"YAML syntax error: {problem}", path, first_line + index,
                            key_on(lines[index])) from None
    except (yaml.YAMLError, RecursionError, UnicodeError) as exc:
        raise ContractError(f"YAML error: {exc}", path, first_line) from None


def _refuse_references(text: str, path: str, first_line: int, lines: list[str]) -> None:
    """Stream the events once: refuse anchors, aliases, foreign tags and deep nesting before composing."""
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):
        line = event.start_mark.line
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise ContractError(
                "YAML anchors and aliases (&name, *name) are not accepted in contract documents; "
                "write the value out", path, first_line + line, key_on(lines[min(line, len(lines) - 1)]))
        tag = getattr(event, "tag", None)
        if tag is not None and tag.removeprefix(_TAG) not in _STANDARD_TAGS:
            raise ContractError(
                f"YAML tag {tag!r} is not accepted in contract documents; write a plain value",
                path, first_line + line, key_on(lines[min(line, len(lines) - 1)]))
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise ContractError(f"YAML nests deeper than {MAX_DEPTH} levels", path,
                                    first_line + line, key_on(lines[min(line, len(lines) - 1)]))
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


@dataclass(frozen=True)
class Section:
    """Reads the nodes of one composed section; lines are reported relative to the document."""

    path: str
    first_line: int

    def line(self, node: yaml.Node) -> int:
        """The 1-based document line where `node` starts."""
        return self.first_line + node.start_mark.line

    def loc(self, node: yaml.Node, key: str) -> Location:
        """The location of `node`, for `key`."""
        return Location(self.path, self.line(node), key)

    def error(self, node: yaml.Node, key: str, message: str) -> ContractError:
        """A ContractError at `node`'s line for `key`."""
        return ContractError(message, self.path, self.line(node), key)

    def error_at(self, line: int, key: str, message: str) -> ContractError:
        """A ContractError at document line `line` for `key`."""
        return ContractError(message, self.path, line, key)

    def mapping(self, node: yaml.Node, key: str, where: str, allowed: Iterable[str],
                line: int | None = None) -> Entries:
        """The entries of mapping `node` (the value of `key`, at `where`); refuses unknown/duplicate keys.

        A missing key is later reported at `line` (the line of `key` itself), else at `node`'s line.
        """
        allowed = tuple(allowed)
        entries = self.free_mapping(node, key, where, line)
        entries.allowed = allowed
        for name, (key_node, _) in entries.items.items():
            if name not in allowed:
                raise self.error(key_node, name, unknown_key_message(name, where, allowed))
        return entries

    def free_mapping(self, node: yaml.Node, key: str, where: str, line: int | None = None) -> Entries:
        """The entries of mapping `node` with any string keys; refuses duplicate keys."""
        if not isinstance(node, yaml.MappingNode):
            raise self.error(node, key, f"{where} must be a mapping of keys, got {describe(node)}")
        items: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for key_node, value_node in node.value:
            if not (isinstance(key_node, yaml.ScalarNode) and key_node.tag == _TAG + "str"):
                raise self.error(key_node, key,
                                 f"keys in {where} must be plain names, got {describe(key_node)}")
            name = key_node.value
            if name in items:
                first = self.line(items[name][0])
                raise self.error(key_node, name, f"duplicate key {name!r} in {where} (first on line {first})")
            items[name] = (key_node, value_node)
        lines = {name: self.line(k) for name, (k, _) in items.items()}
        return Entries(self, node, key, where, items, lines, self.line(node) if line is None else line)

    def sequence(self, node: yaml.Node, key: str) -> list[yaml.Node]:
        """The items of sequence `node`; ContractError if it is not a list."""
        if not isinstance(node, yaml.SequenceNode):
            raise self.error(node, key, f"{key} must be a list, got {describe(node)}")
        return list(node.value)

    def scalar(self, node: yaml.Node, key: str) -> object:
        """The value of a scalar node: str, int, float, bool or None (no other tag is accepted)."""
        if not isinstance(node, yaml.ScalarNode):
            raise self.error(node, key, f"{key} must be a single value, got {describe(node)}")
        tag = node.tag.removeprefix(_TAG)
        try:
            if tag == "str":
                return node.value
            if tag == "int":
                return _CONSTRUCT.construct_yaml_int(node)
            if tag == "float":
                return _CONSTRUCT.construct_yaml_float(node)
            if tag == "bool":
                return _CONSTRUCT.construct_yaml_bool(node)
            if tag == "null":
                return None
        except (ValueError, yaml.YAMLError) as exc:
            raise self.error(node, key, f"cannot read {node.value!r} as {tag}: {exc}") from None
        if tag == "timestamp":  # a date-like plain scalar: keep its text, quote it to be sure
            return node.value
        raise self.error(node, key, f"YAML tag {node.tag!r} is not accepted; write a plain value")

    def string(self, node: yaml.Node, key: str, allow_empty: bool = False) -> str:
        """A string value (numbers are refused: quote them)."""
        value = self.scalar(node, key)
        if not isinstance(value, str):
            raise self.error(node, key, f"{key} must be a string, got {type(value).__name__} {value!r}; "
                             "quote it if it is meant as text")
        if not allow_empty and not value.strip():
            raise self.error(node, key, f"{key} must not be empty")
        return value

    def integer(self, node: yaml.Node, key: str, minimum: int = 0) -> int:
        """An integer value >= `minimum` (bools are refused)."""
        value = self.scalar(node, key)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(node, key, f"{key} must be an integer, got {describe(node)}")
        if value < minimum:
            raise self.error(node, key, f"{key} must be >= {minimum}, got {value}")
        return value

    def number(self, node: yaml.Node, key: str) -> float:
        """A non-negative int or float value, as a float (bools are refused)."""
        value = self.scalar(node, key)
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise self.error(node, key, f"{key} must be a number, got {describe(node)}")
        if not value >= 0:
            raise self.error(node, key, f"{key} must be a number >= 0, got {value}")
        return float(value)

    def boolean(self, node: yaml.Node, key: str) -> bool:
        """A `true`/`false` value."""
        value = self.scalar(node, key)
        if not isinstance(value, bool):
            raise self.error(node, key, f"{key} must be true or false, got {describe(node)}")
        return value


@dataclass
class Entries:
    """The entries of one mapping, consumed by `pop`; `done` fails on leftovers."""

    section: Section
    node: yaml.Node
    key: str
    where: str
    items: dict[str, tuple[yaml.Node, yaml.Node]]
    key_lines: dict[str, int]  # document line of each key, kept after `pop`
    line: int  # where a missing key is reported: the line of the key holding this mapping
    allowed: tuple[str, ...] = ()  # the keys this mapping may hold, named when one is missing

    def pop(self, key: str) -> yaml.Node:
        """The value node of `key`, removed; ContractError at the mapping's key line if missing."""
        if key not in self.items:
            keys = f"; keys here: {', '.join(self.allowed)}" if self.allowed else ""
            raise self.section.error_at(self.line, key, f"missing key {key!r} in {self.where}{keys}")
        return self.items.pop(key)[1]

    def pop_mapping(self, key: str, where: str, allowed: Iterable[str]) -> Entries:
        """The entries of the mapping under `key`, removed (see `Section.mapping`)."""
        node = self.pop(key)
        return self.section.mapping(node, key, where, allowed, self.key_lines[key])

    def pop_optional(self, key: str) -> yaml.Node | None:
        """The value node of `key`, removed, or None if absent."""
        item = self.items.pop(key, None)
        return None if item is None else item[1]

    def done(self) -> None:
        """Fail on entries nobody consumed (the schema and the reader disagree)."""
        if self.items:
            name, (key_node, _) = next(iter(self.items.items()))
            raise self.section.error(key_node, name, f"unknown key {name!r} in {self.where} (leftover entry)")


def unknown_key_message(key: str, where: str, allowed: tuple[str, ...]) -> str:
    """`unknown key 'x' in <where> (did you mean 'y'?); allowed keys here: …`."""
    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown key {key!r} in {where}{hint}; allowed keys here: {', '.join(allowed)}"


def describe(node: yaml.Node) -> str:
    """A short description of a node for messages: `a list`, `a mapping`, `int 5` …"""
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    tag = node.tag.removeprefix(_TAG)
    if tag == "null":
        return "nothing (an empty value)"
    return f"{tag} {node.value!r}"
