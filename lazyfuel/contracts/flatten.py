"""Rebuild the nesting of a flattened FKC block (or front matter) from the fixed key tree.

A flattened document lost every line's leading whitespace, so `accept:` is followed at column 0
by `inputs:`, `- name: source`, `dtypes: […]` and plain YAML nests them wrongly. The key tree in
`schema` is unambiguous, so `reindent` walks the lines keeping a stack of open containers and
puts each line under the innermost open container that accepts it:

- `key: value`: the innermost open mapping whose schema has `key` (names under `fields:` are
  free-form: a key there whose value is a `{…}` flow mapping is a field). A key no open mapping
  knows stays in the innermost one, so the parser reports it there with the keys allowed.
  A known key with an empty value opens its child container (mapping, sequence or fields).
- `- …`: an item of the innermost open sequence; it opens the item's mapping.
- lines inside an unclosed flow collection or quoted string, and plain-scalar continuations,
  are indented under the line that opened them; comments follow the current container.

Lines are only re-indented, never added or removed, so YAML marks map 1:1 back to the document.
A block that already has an indented line is left as it is (`is_indented`). `analyse` also gives
each line's key path and trailing comment, which `fmt` uses to keep comments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lazyfuel.contracts import schema
from lazyfuel.contracts.schema import Free, Map, Node, Seq

_KEY = re.compile(r"""^(?P<key>[A-Za-z_][\w\-.]*|"[^"\\]*"|'[^']*')[ \t]*:(?=[ \t]|$)(?P<rest>.*)$""")
_ITEM = re.compile(r"^-(?=[ \t]|$)[ \t]*(?P<rest>.*)$")
_BLOCK_SCALAR = re.compile(r"^[|>][-+0-9]*$")
_DOCUMENT_MARKER = re.compile(r"^(---|\.\.\.)(?=[ \t]|$)")
_PLAIN_RUN = re.compile(r"""[^ \t"'\[\]{},:#?-]+""")  # characters that change no scanner state
_DOUBLE_QUOTED_STOP = re.compile(r'\\|"')

Path = tuple[str | int, ...]
Unknown = tuple[int, str, str, tuple[str, ...]]


@dataclass
class LineInfo:
    """What `analyse` learned about one line: its new indent, kind, key path and trailing comment."""

    indent: int
    kind: str  # "key" | "item" | "cont" | "comment" | "blank"
    path: Path = ()
    comment: str = ""
    unknown_in: schema.Map | None = None  # for a key no open mapping knows: the one it landed in


@dataclass
class _Frame:
    node: Node
    indent: int  # column of the keys of a mapping, of the dashes of a sequence
    path: Path
    items: int = 0


@dataclass
class _Scan:
    """Carry-over state of the character scanner between lines."""

    depth: int = 0  # open flow collections
    quote: str = ""  # the open quote character, if a quoted scalar spans lines
    at_start: bool = True

    @property
    def open(self) -> bool:
        return bool(self.depth or self.quote)


@dataclass
class _State:
    root: Map
    stack: list[_Frame] = field(default_factory=list)
    scan: _Scan = field(default_factory=_Scan)
    cont_indent: int = 0  # where continuation lines go
    block_scalar: int = -1  # indent of an open block scalar's content, -1 if none


def is_indented(lines: list[str]) -> bool:
    """True if some non-blank line starts with whitespace: the block keeps its own nesting."""
    return any(line[:1] in (" ", "\t") and line.strip() for line in lines)


def reindent(lines: list[str], root: Map) -> list[str]:
    """`lines` re-indented after the key tree `root` (unchanged if already indented); same count."""
    return flatten_block(lines, root)[0]


def flatten_block(lines: list[str], root: Map) -> tuple[list[str], list[Unknown]]:
    """`lines` re-indented (as `reindent`), and the keys no open mapping knows.

    Each unknown key is `(line index, key, where it landed, keys allowed there)`. The strict reader
    refuses them anyway; the parser reports the first one itself when it explains a YAML error
    further down (an unknown parent key breaks the nesting of the lines after it).
    """
    if is_indented(lines):
        return list(lines), []
    infos = analyse(lines, root)
    out = [" " * info.indent + line.strip() if line.strip() else "" for info, line in zip(infos, lines)]
    unknown = [(i, str(info.path[-1]), where(info.path[:-1]), tuple(info.unknown_in.keys))
               for i, info in enumerate(infos) if info.unknown_in is not None]
    return out, unknown


def where(path: Path) -> str:
    """A key path as the parser names it in messages: `accept.inputs[0]` ('' for the top)."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def analyse(lines: list[str], root: Map) -> list[LineInfo]:
    """Indent, kind, key path and trailing comment of each line, ignoring its own indentation."""
    state = _State(root, [_Frame(root, 0, ())])
    return [_line(state, line.strip()) for line in lines]


def _line(state: _State, text: str) -> LineInfo:
    if state.scan.open:
        indent = state.cont_indent
        _scan_text(state.scan, text, fresh=False)
        return LineInfo(indent, "cont")
    if not text:
        return LineInfo(0, "blank")
    if state.block_scalar >= 0:
        if not _ends_block_scalar(state, text):
            return LineInfo(state.block_scalar, "cont")
        state.block_scalar = -1
    if text.startswith("#"):
        return LineInfo(state.stack[-1].indent if state.stack else 0, "comment")
    if _DOCUMENT_MARKER.match(text):
        return LineInfo(0, "cont")  # `---` / `...` stay at column 0, where YAML sees them
    if (match := _KEY.match(text)) is not None:
        return _key_line(state, _unquote(match["key"]), match["rest"], text)
    if (match := _ITEM.match(text)) is not None:
        return _item_line(state, match["rest"], text)
    indent = state.cont_indent
    _scan_text(state.scan, text, fresh=True)
    return LineInfo(indent, "cont")


def _key_line(state: _State, key: str, rest: str, text: str) -> LineInfo:
    value = _value_text(rest)
    frame, known = _find_frame(state.stack, key, value)
    indent = frame.indent
    path = (*frame.path, key)
    comment = _scan_text(state.scan, text, fresh=True)
    _open_child(state, frame, key, value, indent, path)
    unknown_in = frame.node if not known and isinstance(frame.node, Map) else None
    return LineInfo(indent, "key", path, comment, unknown_in)


def _item_line(state: _State, rest: str, text: str) -> LineInfo:
    seq_at = next((i for i in range(len(state.stack) - 1, -1, -1)
                   if isinstance(state.stack[i].node, Seq)), None)
    if seq_at is None:  # an item where no sequence is open: let YAML and the parser object
        indent = state.stack[-1].indent if state.stack else 0
        comment = _scan_text(state.scan, text, fresh=True)
        state.cont_indent = indent + 4
        return LineInfo(indent, "item", (), comment)
    del state.stack[seq_at + 1:]
    seq = state.stack[-1]
    indent, index = seq.indent, seq.items
    seq.items += 1
    item_path = (*seq.path, index)
    item = seq.node.item if isinstance(seq.node, Seq) else None
    path: Path = item_path
    if isinstance(item, Map):
        item_frame = _Frame(item, indent + 2, item_path)
        state.stack.append(item_frame)
        if (match := _KEY.match(rest)) is not None:
            key = _unquote(match["key"])
            path = (*item_path, key)
            comment = _scan_text(state.scan, text, fresh=True)
            _open_child(state, item_frame, key, _value_text(match["rest"]), indent + 2, path)
            return LineInfo(indent, "item", path, comment)
    comment = _scan_text(state.scan, text, fresh=True)
    state.cont_indent = indent + 4
    return LineInfo(indent, "item", path, comment)


def _open_child(state: _State, frame: _Frame, key: str, value: str, indent: int, path: Path) -> None:
    """After a key line: open its child container, or note where continuations go."""
    state.cont_indent = indent + 4
    child = frame.node.keys.get(key) if isinstance(frame.node, Map) else None
    if value == "" and isinstance(child, Map | Seq | Free):
        state.stack.append(_Frame(child, indent + 2, path))
    elif _BLOCK_SCALAR.match(value):
        state.block_scalar = indent + 2


def _find_frame(stack: list[_Frame], key: str, value: str) -> tuple[_Frame, bool]:
    """The innermost open mapping accepting `key` (the stack is cut back to it), and whether one did."""
    for i in range(len(stack) - 1, -1, -1):
        node = stack[i].node
        if (isinstance(node, Map) and key in node.keys) or (isinstance(node, Free) and value.startswith("{")):
            del stack[i + 1:]
            return stack[i], True
    while len(stack) > 1 and isinstance(stack[-1].node, Seq):
        stack.pop()  # an unknown key right after `inputs:` belongs to `accept`, not to the list
    return stack[-1], False


def _ends_block_scalar(state: _State, text: str) -> bool:
    """Whether `text` leaves an open block scalar: a key some open mapping knows, or a list item."""
    if (match := _KEY.match(text)) is not None:
        key = _unquote(match["key"])
        return any(isinstance(f.node, Map) and key in f.node.keys for f in state.stack)
    return _ITEM.match(text) is not None and any(isinstance(f.node, Seq) for f in state.stack)


def _value_text(rest: str) -> str:
    """The value part of `key: rest` without a trailing comment, stripped."""
    probe = _Scan(at_start=True)
    comment = _scan_text(probe, rest, fresh=True)
    return rest[: len(rest) - len(comment)].strip() if comment else rest.strip()


def _unquote(key: str) -> str:
    return key[1:-1] if key[:1] in "\"'" and len(key) >= 2 else key


def _scan_text(scan: _Scan, text: str, fresh: bool) -> str:
    """Advance the flow/quote scanner over one line; return its trailing comment ('' if none)."""
    if fresh:
        scan.at_start = True
    i, n = 0, len(text)
    while i < n:
        if scan.quote == '"':
            found = _DOUBLE_QUOTED_STOP.search(text, i)
            if found is None:
                return ""
            i = found.end() + (1 if found.group() == "\\" else 0)
            if found.group() == '"':
                scan.quote, scan.at_start = "", False
            continue
        if scan.quote == "'":
            j = text.find("'", i)
            if j < 0:
                return ""
            if text[j + 1: j + 2] == "'":
                i = j + 2
                continue
            scan.quote, scan.at_start, i = "", False, j + 1
            continue
        if (run := _PLAIN_RUN.match(text, i)) is not None:
            scan.at_start, i = False, run.end()
            continue
        c = text[i]
        if c in " \t":
            pass
        elif c == "#" and (i == 0 or text[i - 1] in " \t"):
            return text[i:]
        elif c in "\"'" and scan.at_start:
            scan.quote = c
        elif c in "[{" and (scan.at_start or scan.depth):
            scan.depth += 1
            scan.at_start = True
        elif c in "]}" and scan.depth:
            scan.depth -= 1
            scan.at_start = False
        elif c == "," and scan.depth:
            scan.at_start = True
        elif c == ":" and text[i + 1: i + 2] in ("", " ", "\t"):
            scan.at_start = True
        elif c in "-?" and scan.at_start and text[i + 1: i + 2] in ("", " ", "\t"):
            pass
        else:
            scan.at_start = False
        i += 1
    return ""
