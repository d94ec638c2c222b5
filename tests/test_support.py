"""`lazyfuel.support`: the ops x backends table from a registry (one row per op kind, backend and
kernel_source, each data dtype once, rows sorted), written between the README's markers and
nowhere else in the file."""

from __future__ import annotations

from pathlib import Path

import lazyfuel
from lazyfuel.providers import default_registry
from lazyfuel.registry import Registry
from lazyfuel.support import BEGIN, END, support_table, write_into

CPU = Path(lazyfuel.__file__).parent / "contracts" / "cpu.md"


def test_a_row_per_op_backend_and_source_with_each_data_dtype_once():
    registry = Registry()
    bindings = registry.load(CPU)
    lines = support_table(registry).splitlines()
    assert lines[:2] == ["| op kind | backend | kernel_source | dtypes (first input) |",
                         "| --- | --- | --- | --- |"]
    rows = [line.strip("| ").split(" | ") for line in lines[2:]]
    assert [tuple(r[:3]) for r in rows] == sorted({(b.op_kind.name, "Cpu", "numpy") for b in bindings})
    gather = next(r for r in rows if r[0] == "Gather")[3].split()
    want = list(dict.fromkeys(b.dtypes[0].name for b in bindings if b.op_kind.name == "Gather"))
    assert gather == want and len(set(gather)) == len(gather)


def test_an_empty_registry_has_the_header_only():
    assert support_table(Registry()).count("\n") == 1


def test_the_default_registry_is_the_default():
    assert support_table() == support_table(default_registry())


def test_write_into_replaces_only_what_is_between_the_markers(tmp_path):
    path = tmp_path / "README.md"
    path.write_text(f"# title\n\nbefore\n{BEGIN}\n| stale |\n{END}\nafter\n", encoding="utf-8")
    write_into(path)
    want = f"# title\n\nbefore\n{BEGIN}\n{support_table()}\n{END}\nafter\n"
    assert path.read_text(encoding="utf-8") == want
    write_into(path)  # idempotent
    assert path.read_text(encoding="utf-8").count(BEGIN) == 1
