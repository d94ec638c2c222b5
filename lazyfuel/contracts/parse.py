"""Parse FKC documents: front matter, prose and ```fkc blocks into typed, validated contracts.

A document is a YAML front matter between `---` lines (`fkc_version: 1` and `provider`), markdown
prose, and one ```fkc fenced block per kernel. Flattened sections (every line's indentation lost)
are re-indented from the fixed schema first (`flatten`); line numbers never move, so every
`ContractError` names the document path, the 1-based line in the whole document and the key.
Parsing only reads and checks: no kernel is linked, nothing runs.
"""

from __future__ import annotations

import bisect
import os
import re
from dataclasses import dataclass, replace

import yaml

from lazyfuel.contracts import schema
from lazyfuel.contracts.flatten import flatten_block
from lazyfuel.contracts.kernel_block import read_kernel
from lazyfuel.contracts.model import (
    Backend,
    ContractDocument,
    ContractError,
    KernelContract,
    Location,
    Provider,
)
from lazyfuel.contracts.nodes import Section, compose, unknown_key_message

MAX_CHARS = 4 * 1024 * 1024
MAX_BYTES = 4 * MAX_CHARS  # the most a file of MAX_CHARS characters can take in UTF-8
FKC_VERSION = 1
_FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\s`]*)")
_HEADING = re.compile(r"^ {0,3}(?P<level>#{1,6})(?:[ \t]|$)")
_THEMATIC_BREAK = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")


@dataclass(frozen=True)
class _Block:
    """A ```fkc block: 0-based indices of its opening and closing fence lines."""

    start: int
    end: int


def parse_document(text: str, path: str = "<string>") -> ContractDocument:
    """Parse and validate one FKC document; ContractError (path, line, key) on anything malformed.

    Returns the provider, the prose (markdown outside the ```fkc blocks) and one `KernelContract`
    per block, in document order; each contract's `doc` is the prose of its `## ` section.
    """
    if not isinstance(text, str):
        raise ContractError(f"a contract document is text, got {type(text).__name__}", path)
    if len(text) > MAX_CHARS:
        raise ContractError(
            f"document is {len(text)} characters long; at most {MAX_CHARS} are accepted", path)
    lines = split_lines(text)
    open_at, close_at = _front_matter_bounds(lines, path)
    provider = _read_front_matter(lines[open_at + 1: close_at], open_at + 2, path)
    blocks = _find_blocks(lines, close_at + 1, path)
    contracts: list[KernelContract] = []
    seen: dict[str, int] = {}
    for block in blocks:
        node = _compose(lines[block.start + 1: block.end], schema.KERNEL, "the fkc block", path,
                        block.start + 2)
        contract = read_kernel(Section(path, block.start + 2), node, block.start + 1, provider)
        if contract.kernel in seen:
            raise ContractError(f"duplicate kernel name {contract.kernel!r} (first declared on line "
                                f"{seen[contract.kernel]}); each kernel is declared once per document",
                                path, contract.loc.line, "kernel")
        seen[contract.kernel] = contract.loc.line
        contracts.append(contract)
    docs = _section_docs(lines, close_at + 1, blocks)
    contracts = [replace(c, doc=doc) for c, doc in zip(contracts, docs)]
    parts = _prose_parts(lines, close_at + 1, blocks)
    return ContractDocument(path, provider, "".join(parts), tuple(contracts), tuple(parts))


def split_lines(text: str) -> list[str]:
    """The lines of a document as the parser numbers them (BOM dropped, any newline style)."""
    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()  # the newline ending the last line starts no line of its own
    return lines


def yaml_sections(lines: list[str], path: str = "<string>") -> list[list[str]]:
    """The raw lines of the front matter and of each ```fkc block, in order (fences left out)."""
    open_at, close_at = _front_matter_bounds(lines, path)
    blocks = _find_blocks(lines, close_at + 1, path)
    return [lines[open_at + 1: close_at], *(lines[b.start + 1: b.end] for b in blocks)]


def read_document(path: str | os.PathLike[str]) -> str:
    """The text of the document file at `path` (UTF-8), read only if it can be small enough: a
    file of more than `MAX_BYTES` is refused before it is read (its size from stat, and at most
    `MAX_BYTES + 1` bytes read, so a device or a pipe that never ends costs no memory either).
    ContractError if too long or not UTF-8; OSError if it cannot be opened."""
    name = os.fspath(path)
    refuse = f"at most {MAX_CHARS} characters ({MAX_BYTES} bytes of UTF-8) are accepted"
    size = os.stat(name).st_size
    if size > MAX_BYTES:
        raise ContractError(f"document is {size} bytes long; {refuse}", name)
    with open(name, "rb") as handle:
        raw = handle.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise ContractError(f"document is more than {MAX_BYTES} bytes long; {refuse}", name)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ContractError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", name) from None


def parse_file(path: str | os.PathLike[str]) -> ContractDocument:
    """Read (`read_document`) and parse the FKC document at `path`; ContractError if it is too
    long, not UTF-8 or malformed."""
    return parse_document(read_document(path), os.fspath(path))


def parse_contracts(path_or_text: str | os.PathLike[str]) -> list[KernelContract]:
    """The validated contracts of a document given as a file path or as document text.

    A `Path`, or a `str` naming an existing file, is read; any other `str` is the document text.
    Nothing is linked or run. ContractError (with `.path .line .key`) if the document is malformed;
    FileNotFoundError for a `Path` that does not exist.
    """
    if isinstance(path_or_text, os.PathLike):
        return list(parse_file(path_or_text).contracts)
    if not isinstance(path_or_text, str):
        raise TypeError(f"parse_contracts takes a path or document text, got {type(path_or_text).__name__}")
    if "\n" not in path_or_text and _is_file(path_or_text):
        return list(parse_file(path_or_text).contracts)
    if "\n" not in path_or_text.strip() and not path_or_text.lstrip().startswith("---"):
        raise ContractError(f"{path_or_text!r} is neither an existing file nor FKC document text "
                            "(which starts with a `---` front matter)")
    return list(parse_document(path_or_text).contracts)


def _is_file(name: str) -> bool:
    try:
        return os.path.isfile(name)
    except (OSError, ValueError):
        return False


def _compose(body: list[str], root: schema.Map, name: str, path: str, first_line: int) -> yaml.Node | None:
    """Re-indent a flattened section and compose it; an unknown key explains a YAML error after it."""
    lines, unknown = flatten_block(body, root)
    try:
        return compose("\n".join(lines), path, first_line)
    except ContractError as exc:
        if not unknown or first_line + unknown[0][0] > exc.line or not exc.reason.startswith("YAML syntax"):
            raise
        index, key, where, allowed = unknown[0]
        raise ContractError(unknown_key_message(key, where or name, allowed), path, first_line + index,
                            key) from None


def _front_matter_bounds(lines: list[str], path: str) -> tuple[int, int]:
    """Indices of the `---` lines opening and closing the front matter."""
    open_at = next((i for i, line in enumerate(lines) if line.strip()), None)
    if open_at is None or lines[open_at].rstrip() != "---":
        raise ContractError("a contract document starts with a YAML front matter between `---` lines "
                            "(fkc_version: 1, provider: …)", path, 1 if open_at is None else open_at + 1)
    close_at = next((i for i in range(open_at + 1, len(lines)) if lines[i].rstrip() == "---"), None)
    if close_at is None:
        raise ContractError("the front matter opened here is never closed by a `---` line", path, open_at + 1)
    return open_at, close_at


def _read_front_matter(body: list[str], first_line: int, path: str) -> Provider:
    sec = Section(path, first_line)
    node = _compose(body, schema.FRONT_MATTER, "the front matter", path, first_line)
    if node is None:
        raise ContractError("empty front matter; it needs fkc_version and provider", path, first_line - 1)
    top = sec.mapping(node, "front matter", "the front matter", schema.FRONT_MATTER.keys, first_line - 1)
    version_node = top.pop("fkc_version")
    version = sec.scalar(version_node, "fkc_version")
    if version != FKC_VERSION or isinstance(version, bool):
        raise sec.error(version_node, "fkc_version", f"fkc_version {version!r} is not supported; this "
                        f"importer reads fkc_version: {FKC_VERSION}")
    provider_line = top.key_lines.get("provider", first_line - 1)
    entries = top.pop_mapping("provider", "provider", schema.PROVIDER.keys)
    top.done()
    name = sec.string(entries.pop("name"), "name")
    backend_node = entries.pop("backend")
    backend_text = sec.scalar(backend_node, "backend")
    try:
        backend = Backend.parse(backend_text if isinstance(backend_text, str) else repr(backend_text))
    except ValueError as exc:
        raise sec.error(backend_node, "backend", str(exc)) from None
    values = [sec.string(entries.pop(key), key)
              for key in ("kernel_source", "link_registry", "revision_base")]
    entries.done()
    return Provider(name, backend, *values, fkc_version=FKC_VERSION,
                    loc=Location(path, provider_line, "provider"),
                    key_lines=tuple(entries.key_lines.items()))


def _find_blocks(lines: list[str], start: int, path: str) -> list[_Block]:
    """The ```fkc blocks after the front matter; other fenced code is prose."""
    blocks: list[_Block] = []
    fence, fence_at, is_fkc = "", -1, False
    for i in range(start, len(lines)):
        match = _FENCE.match(lines[i])
        if not fence:
            if match is not None:
                fence, fence_at, is_fkc = match["fence"], i, match["info"] == "fkc"
        elif _closes(lines[i], fence):
            if is_fkc:
                blocks.append(_Block(fence_at, i))
            fence = ""
    if fence and is_fkc:
        raise ContractError("this ```fkc block is never closed by a ``` line", path, fence_at + 1, "fkc")
    if not blocks:
        raise ContractError("the document declares no kernel: it has no ```fkc block", path, len(lines))
    return blocks


def _closes(line: str, fence: str) -> bool:
    """Whether `line` closes a code fence opened by `fence` (the same character, at least as many)."""
    stripped = line.strip()
    indent = len(line) - len(line.lstrip(" "))
    return indent <= 3 and len(stripped) >= len(fence) and stripped == fence[0] * len(stripped)


def _prose_parts(lines: list[str], start: int, blocks: list[_Block]) -> list[str]:
    """The prose around the blocks: before the first, between each pair, after the last."""
    bounds = [start, *(i for b in blocks for i in (b.start, b.end + 1)), len(lines)]
    return ["".join(line + "\n" for line in lines[a:b]) for a, b in zip(bounds[::2], bounds[1::2])]


def _section_docs(lines: list[str], start: int, blocks: list[_Block]) -> list[str]:
    """For each block, the prose of the `## ` section holding it (heading included, blocks left out)."""
    inside = {i for b in blocks for i in range(b.start, b.end + 1)}
    skip = inside | _code_lines(lines, start, blocks)
    headings = [i for i in range(start, len(lines)) if i not in skip and _is_heading(lines[i], 2)]
    docs = []
    for block in blocks:
        at = bisect.bisect_left(headings, block.start)
        if at == 0 or not _is_heading(lines[headings[at - 1]], 2, exact=True):
            docs.append("")  # no section, or a `# ` title: the block has no section of its own
            continue
        end = headings[at] if at < len(headings) else len(lines)
        kept = [lines[i] for i in range(headings[at - 1], end) if i not in inside]
        while kept and (not kept[-1].strip() or _THEMATIC_BREAK.match(kept[-1])):
            kept.pop()
        docs.append("\n".join(kept))
    return docs


def _is_heading(line: str, level: int, exact: bool = False) -> bool:
    """Whether `line` is an ATX heading of `level` (or of a higher rank, unless `exact`)."""
    match = _HEADING.match(line)
    return match is not None and (len(match["level"]) == level if exact else len(match["level"]) <= level)


def _code_lines(lines: list[str], start: int, blocks: list[_Block]) -> set[int]:
    """Indices of lines inside non-fkc fenced code (their `#` lines are no headings)."""
    code: set[int] = set()
    starts = {b.start for b in blocks}
    fence, fence_at = "", -1
    for i in range(start, len(lines)):
        line = lines[i]
        match = _FENCE.match(line)
        if not fence and match is not None:
            fence, fence_at = match["fence"], i
        elif fence and _closes(line, fence):
            if fence_at not in starts:
                code.update(range(fence_at, i + 1))
            fence = ""
    if fence:  # an unclosed fence runs to the end of the document
        code.update(range(fence_at, len(lines)))
    return code
