"""The table of supported ops × dtypes × backends, generated from the default registry.

`python -m lazyfuel.support` prints it as markdown and `python -m lazyfuel.support README.md`
rewrites it there, between the markers; a test checks that the copy there is current.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

from lazyfuel.providers import default_registry
from lazyfuel.registry import Registry

BEGIN = "<!-- support-table:begin (python -m lazyfuel.support) -->"
END = "<!-- support-table:end -->"


def support_table(registry: Registry | None = None) -> str:
    """Markdown: one row per (op kind, backend, kernel_source), the data dtypes it binds."""
    registry = registry if registry is not None else default_registry()  # an empty one is falsy
    rows: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for b in registry.bindings():
        rows[(b.op_kind.name, b.backend.name, b.kernel_source)].append(b.dtypes[0].name)
    lines = ["| op kind | backend | kernel_source | dtypes (first input) |", "| --- | --- | --- | --- |"]
    for (op, backend, source), dtypes in sorted(rows.items()):
        lines.append(f"| {op} | {backend} | {source} | {' '.join(dict.fromkeys(dtypes))} |")  # once each
    return "\n".join(lines)


def write_into(path: Path) -> None:
    """Replace the table between the markers in `path` (README.md) with the current one."""
    text = path.read_text(encoding="utf-8")
    head, tail = text[:text.index(BEGIN) + len(BEGIN)], text[text.index(END):]
    path.write_text(f"{head}\n{support_table()}\n{tail}", encoding="utf-8")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        write_into(Path(sys.argv[1]))  # python -m lazyfuel.support README.md
    else:
        print(f"{BEGIN}\n{support_table()}\n{END}")
