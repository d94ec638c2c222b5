"""`lazyfuel contracts check|list|show|fmt FILE…`: contract documents parsed, linked, listed,
documented and formatted."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lazyfuel.commands.text import table
from lazyfuel.contracts import ContractError, format_text, parse_document
from lazyfuel.contracts.parse import read_document
from lazyfuel.providers import default_registry
from lazyfuel.registry import Binding


def _contracts_check(args: argparse.Namespace) -> int:
    failed = 0
    for path in args.files:
        try:
            bindings = _loaded(path)
        except (ContractError, OSError) as err:
            print(f"{err}", file=sys.stderr)
            failed += 1
            continue
        kernels = {b.contract.kernel for b in bindings}
        print(f"ok {path}: {len(kernels)} kernel(s), {len(bindings)} binding(s)")
    return 1 if failed else 0


def _contracts_list(args: argparse.Namespace) -> int:
    rows = [("op_kind", "dtype key", "backend", "kernel_source", "symbol", "KernelRef", "revision",
             "origin")]
    for path in args.files:
        for b in _loaded(path):
            rows.append((b.op_kind.name, "[" + ",".join(d.name for d in b.dtypes) + "]",
                         b.backend.name, b.kernel_source, b.symbol, b.kernel_ref.name, b.revision_hash,
                         b.origin))
    print(table(rows))
    print(f"{len(rows) - 1} binding(s)")
    return 0


def _contracts_show(args: argparse.Namespace) -> int:
    for path in args.files:
        doc = parse_document(read_document(path), path)
        print(f"# {doc.provider.name} ({doc.provider.backend}, {doc.provider.kernel_source}) — {path}")
        for c in doc.contracts:
            if args.kernel and c.kernel != args.kernel:
                continue
            dtypes = ", ".join(f"{i.name}: {'/'.join(d.name for d in i.dtypes)}" for i in c.inputs)
            print(f"\n## {c.kernel} ({c.op_kind}) — {c.blurb}\n   inputs {dtypes}; "
                  f"layout strategy {c.caps.awkward_layout_strategy}; determinism {c.determinism}; "
                  f"bytes_moved = {c.cost.bytes_moved.text}\n")
            print(c.doc.strip())
    return 0


def _contracts_fmt(args: argparse.Namespace) -> int:
    for path in args.files:
        text = format_text(read_document(path), path)
        if args.write:
            Path(path).write_text(text, encoding="utf-8")
            print(f"formatted {path}", file=sys.stderr)
        else:
            sys.stdout.write(text)
    return 0


def _loaded(path: str) -> list[Binding]:
    """The bindings `lf.load_contracts(path)` would give: the document loaded into a copy of the
    default registry (so a binding competing with a default one is refused as it would be there;
    a shipped document's bindings are the default ones, origin "default")."""
    return default_registry().copy().load(Path(path))


def add_contracts_commands(sub: argparse._SubParsersAction) -> None:
    """`contracts` and its actions."""
    contracts = sub.add_parser("contracts", help="check, list, show or format contract documents")
    csub = contracts.add_subparsers(dest="action", required=True)
    for name, func, help_ in (("check", _contracts_check, "parse and link; non-zero exit on any error"),
                              ("list", _contracts_list, "one row per binding"),
                              ("show", _contracts_show, "print each kernel's documentation"),
                              ("fmt", _contracts_fmt, "print the canonical indented form")):
        p = csub.add_parser(name, help=help_)
        p.add_argument("files", nargs="+", metavar="FILE")
        p.set_defaults(func=func)
        if name == "show":
            p.add_argument("--kernel", help="only this kernel")
        if name == "fmt":
            p.add_argument("--write", action="store_true", help="rewrite the file in place")
