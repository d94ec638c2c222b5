"""Write FKC documents in their canonical, indented form (`lazyfuel contracts fmt`).

`format_document` emits the front matter nested, keeps the prose as it is, and re-emits each
```fkc block from its contract: 2-space indentation, keys in schema order, flow mappings for
layout caps, field specs and fast paths, strings plain when YAML reads them back as the same
string and double-quoted otherwise. `format_text` does the same from text and keeps each end-of-
line or own-line comment of the front matter and blocks on the key it belonged to.

Guarantees: parsing the output gives equal contracts; each block of the output is plain,
correctly nested YAML (`yaml.safe_load` reads it right); formatting the output changes nothing.
"""

from __future__ import annotations

import math
import re

import yaml

from lazyfuel.contracts import schema
from lazyfuel.contracts.flatten import Path, analyse
from lazyfuel.contracts.model import ContractDocument, KernelContract, LayoutCaps, Provider
from lazyfuel.contracts.parse import parse_document, split_lines, yaml_sections

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # whole text only: fullmatch ($ allows a trailing newline)
_STR_TAG = "tag:yaml.org,2002:str"
_RESOLVER = yaml.resolver.Resolver()
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r", "\0": "\\0"}
_PRINTABLE = re.compile("[\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_END: Path = ("<end>",)

Line = tuple[str, Path]  # the text of an output line (indented) and the key path it declares
Comments = dict[Path, tuple[list[str], str]]  # path -> (own-line comments above it, end-of-line comment)


def format_text(text: str, path: str = "<string>") -> str:
    """The canonical form of document `text`; ContractError (as `parse_document`) if it is malformed.

    Comments in the front matter and the blocks stay on the keys they followed or preceded.
    """
    doc = parse_document(text, path)
    sections = yaml_sections(split_lines(text), path)
    front = _comments(sections[0], schema.FRONT_MATTER)
    blocks = [_comments(body, schema.KERNEL) for body in sections[1:]]
    return format_document(doc, front, blocks)


def format_document(doc: ContractDocument, front_comments: Comments | None = None,
                    block_comments: list[Comments] | None = None) -> str:
    """The canonical text of `doc`: front matter, prose, and each block where it stood."""
    parts = list(doc.prose_parts)
    if len(parts) != len(doc.contracts) + 1:  # a document built by hand: prose first, then blocks
        parts = [doc.prose if not doc.prose or doc.prose.endswith("\n") else doc.prose + "\n"]
        parts += [""] * len(doc.contracts)
    out = ["---\n", _render(_front_lines(doc.provider), front_comments or {}), "---\n", parts[0]]
    block_comments = block_comments or []
    for i, contract in enumerate(doc.contracts):
        comments = block_comments[i] if i < len(block_comments) else {}
        out += ["```fkc\n", _render(block_lines(contract), comments), "```\n", parts[i + 1]]
    return "".join(out)


def format_contract(contract: KernelContract) -> str:
    """The canonical YAML body of one contract's ```fkc block (without the fences)."""
    return _render(block_lines(contract), {})


def scalar(value: object) -> str:
    """`value` as YAML text that reads back as the same value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        mantissa, e, exponent = text.partition("e")
        return f"{mantissa}.0e{exponent}" if e and "." not in mantissa else text
    text = str(value)
    if _PLAIN.fullmatch(text) and _RESOLVER.resolve(yaml.ScalarNode, text, (True, False)) == _STR_TAG:
        return text
    return quoted(text)


def quoted(text: str) -> str:
    """`text` as a YAML double-quoted scalar."""
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif _PRINTABLE.match(ch):
            out.append(ch)
        elif ord(ch) <= 0xFF:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def _flow(pairs: list[tuple[str, str]]) -> str:
    return "{ " + ", ".join(f"{k}: {v}" for k, v in pairs) + " }" if pairs else "{}"


def _front_lines(provider: Provider) -> list[Line]:
    lines: list[Line] = [(f"fkc_version: {provider.fkc_version}", ("fkc_version",)),
                         ("provider:", ("provider",))]
    for key in schema.PROVIDER.keys:
        lines.append((f"  {key}: {scalar(getattr(provider, key))}", ("provider", key)))
    return lines


def block_lines(c: KernelContract) -> list[Line]:
    """The lines of a contract's block, each with its key path (for comments)."""
    revision = "auto" if c.kernel_revision_hash is None else quoted(c.kernel_revision_hash)
    out: list[Line] = [(f"{k}: {scalar(getattr(c, k))}", (k,)) for k in
                       ("kernel", "op_kind", "blurb", "backend", "kernel_source", "entry_point")]
    out.append((f"kernel_revision_hash: {revision}", ("kernel_revision_hash",)))
    out += [("accept:", ("accept",)), ("  inputs:", ("accept", "inputs"))]
    for i, spec in enumerate(c.inputs):
        at: Path = ("accept", "inputs", i)
        out.append((f"    - name: {scalar(spec.name)}", (*at, "name")))
        out.append((f"      dtypes: [{', '.join(d.name for d in spec.dtypes)}]", (*at, "dtypes")))
        out.append((f"      layout: {_layout(spec.layout)}", (*at, "layout")))
        out.append((f"      rank: {'any' if spec.rank is None else spec.rank}", (*at, "rank")))
        if spec.shape_constraint:
            out.append((f"      shape_constraint: {quoted(spec.shape_constraint)}",
                        (*at, "shape_constraint")))
    fields = c.op_params.fields
    out += [("op_params:", ("op_params",)),
            (f"  variant: {scalar(c.op_params.variant)}", ("op_params", "variant")),
            ("  fields:" + ("" if fields else " {}"), ("op_params", "fields"))]
    for f in fields:
        pairs = [("kind", scalar(f.kind))] + [(k, quoted(v)) for k, v in
                                              (("note", f.note), ("constraint", f.constraint)) if v]
        out.append((f"    {f.name}: {_flow(pairs)}", ("op_params", "fields", f.name)))
    out += [("return:", ("return",)), ("  outputs:", ("return", "outputs"))]
    for i, spec in enumerate(c.outputs):
        at = ("return", "outputs", i)
        out.append((f"    - name: {scalar(spec.name)}", (*at, "name")))
        out += [(f"      {k}: {v}", (*at, k)) for k, v in (
            ("dtype_rule", str(spec.dtype_rule)), ("shape_rule", str(spec.shape_rule)),
            ("layout_guarantee", scalar(spec.layout_guarantee)), ("aliasing", scalar(spec.aliasing)))]
    caps = c.caps
    out += [("caps:", ("caps",)),
            (f"  awkward_layout_strategy: {caps.awkward_layout_strategy.name}",
             ("caps", "awkward_layout_strategy")),
            ("  fast_paths:" + ("" if caps.fast_paths else " []"), ("caps", "fast_paths"))]
    for i, fp in enumerate(caps.fast_paths):
        out.append((f"    - {_flow([('when', quoted(fp.when)), ('class', scalar(fp.cls))])}",
                    ("caps", "fast_paths", i)))
    out += [(f"  {k}: {scalar(getattr(caps, k))}", ("caps", k))
            for k in ("in_place", "alignment_bytes", "access_granularity_bits")]
    if caps.device_kinds:
        out.append((f"  device_kinds: [{', '.join(caps.device_kinds)}]", ("caps", "device_kinds")))
    if caps.misfit is not None:
        out.append((f"  misfit: {quoted(caps.misfit.text)}", ("caps", "misfit")))
    cost = c.cost
    out += [("cost:", ("cost",)), (f"  provenance: {cost.provenance.name}", ("cost", "provenance")),
            (f"  class: {scalar(cost.cls)}", ("cost", "class")),
            (f"  flops: {quoted(cost.flops.text)}", ("cost", "flops")),
            (f"  bytes_moved: {quoted(cost.bytes_moved.text)}", ("cost", "bytes_moved"))]
    p = c.precision
    ulp = int(p.max_ulp) if p.max_ulp.is_integer() else p.max_ulp
    out += [("precision:", ("precision",)),
            (f"  bit_stable_on_same_hardware: {scalar(p.bit_stable_on_same_hardware)}",
             ("precision", "bit_stable_on_same_hardware")),
            (f"  max_ulp: {scalar(ulp)}", ("precision", "max_ulp")),
            (f"  max_relative: {scalar(p.max_relative)}", ("precision", "max_relative")),
            (f"  max_absolute: {scalar(p.max_absolute)}", ("precision", "max_absolute")),
            (f"  audited: {scalar(p.audited)}", ("precision", "audited"))]
    if p.notes:
        out.append((f"  notes: {quoted(p.notes)}", ("precision", "notes")))
    out.append((f"determinism: {c.determinism.name}", ("determinism",)))
    return out


def _layout(caps: LayoutCaps) -> str:
    return _flow([(k, getattr(caps, k).name) for k in schema.LAYOUT_KEYS])


def _render(lines: list[Line], comments: Comments) -> str:
    out = []
    for text, path in lines:
        above, trailing = comments.get(path, ([], ""))
        indent = text[: len(text) - len(text.lstrip(" "))]
        out += [indent + c for c in above]
        out.append(f"{text} {trailing}" if trailing else text)
    out += comments.get(_END, ([], ""))[0]
    return "".join(line + "\n" for line in out)


def _comments(body: list[str], root: schema.Map) -> Comments:
    """Each key path's own-line comments above it and its end-of-line comment."""
    found: Comments = {}
    pending: list[str] = []
    for info, line in zip(analyse(body, root), body):
        if info.kind == "comment":
            pending.append(line.strip())
        elif info.kind in ("key", "item") and info.path:
            found[info.path] = (pending, info.comment)
            pending = []
    if pending:
        found[_END] = (pending, "")
    return found
