"""`lazyfuel contracts check|list|show|fmt` (`lazyfuel.commands.contracts`): each action's output
for a shipped document and a malformed one, and fmt --write rewriting a file canonically."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import lazyfuel
from lazyfuel.commands.contracts import _loaded, add_contracts_commands
from lazyfuel.contracts import format_text, parse_document
from lazyfuel.contracts.parse import read_document

CPU = Path(lazyfuel.__file__).parent / "contracts" / "cpu.md"
HEADING = re.compile(r"^## (\w+) \(\w+\) — ", re.MULTILINE)  # one per kernel shown
MALFORMED = Path(__file__).resolve().parents[1] / "contracts" / "malformed" / "bad_dtype.md"


def run(parse, *argv: str) -> int:
    args = parse(add_contracts_commands, "contracts", *argv)
    return args.func(args)


def test_check_counts_kernels_and_bindings_and_names_a_malformed_file(parse, capsys):
    doc = parse_document(read_document(CPU), str(CPU))
    bindings = _loaded(str(CPU))
    assert run(parse, "check", str(CPU), str(MALFORMED)) == 1
    out, err = capsys.readouterr()
    assert out == f"ok {CPU}: {len(doc.contracts)} kernel(s), {len(bindings)} binding(s)\n"
    assert err.startswith(f"{MALFORMED}:25: dtypes: unknown dtype 'F31'; expected one of F32 ")
    assert run(parse, "check", str(CPU)) == 0


def test_a_shipped_documents_bindings_are_the_default_ones(parse):
    bindings = _loaded(str(CPU))
    assert bindings and {b.origin for b in bindings} == {"default"}
    assert {b.symbol for b in bindings} >= {"lazyfuel::cpu::index_select_f32", "lazyfuel::cpu::gather_u8"}
    kernels = {c.kernel for c in parse_document(read_document(CPU)).contracts}
    assert {b.contract.kernel for b in bindings} == kernels


def test_list_prints_one_row_per_binding_under_a_header(parse, capsys):
    bindings = _loaded(str(CPU))
    assert run(parse, "list", str(CPU)) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["op_kind", "dtype", "key", "backend", "kernel_source", "symbol", "KernelRef",
                                "revision", "origin"]
    assert lines[-1] == f"{len(bindings)} binding(s)"
    rows = [line.split() for line in lines[1:-1]]
    assert [r[4] for r in rows] == [b.symbol for b in bindings]
    first = bindings[0]
    assert rows[0] == [first.op_kind.name, "[" + ",".join(d.name for d in first.dtypes) + "]", "Cpu", "numpy",
                       first.symbol, first.kernel_ref.name, first.revision_hash, "default"]


def test_show_prints_the_one_kernel_asked_for(parse, capsys):
    assert run(parse, "show", str(CPU), "--kernel", "gather") == 0
    out = capsys.readouterr().out
    assert out.startswith(f"# lazyfuel-cpu-reference (Cpu, numpy) — {CPU}\n\n## gather (Gather) — ")
    assert HEADING.findall(out) == ["gather"]
    assert run(parse, "show", str(CPU)) == 0
    kernels = [c.kernel for c in parse_document(read_document(CPU)).contracts]
    assert HEADING.findall(capsys.readouterr().out) == kernels


def test_fmt_prints_the_canonical_form_and_write_rewrites_the_file(parse, capsys, tmp_path):
    flattened = Path(__file__).resolve().parents[1] / "contracts" / "data" / "reference_seed.txt"
    copy = tmp_path / "seed.md"
    shutil.copy(flattened, copy)
    want = format_text(flattened.read_text(encoding="utf-8"), str(flattened))
    assert run(parse, "fmt", str(copy)) == 0
    assert capsys.readouterr().out == want and copy.read_text(encoding="utf-8") != want
    assert run(parse, "fmt", str(copy), "--write") == 0
    assert capsys.readouterr() == ("", f"formatted {copy}\n")
    assert copy.read_text(encoding="utf-8") == want == format_text(want, str(copy))


def test_every_action_wants_a_file(parse):
    for action in ("check", "list", "show", "fmt"):
        with pytest.raises(SystemExit):
            parse(add_contracts_commands, "contracts", action)
