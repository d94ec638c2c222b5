"""`lazyfuel.ops` is a layer: above `contracts` and the bottom modules, below everything else.

Its modules import only those (and each other); none of those imports it. Read from the source
(every `import` statement, function-local ones included), so an upward import cannot hide.
"""

from __future__ import annotations

import ast
from pathlib import Path

import lazyfuel

PACKAGE = Path(lazyfuel.__file__).resolve().parent
# the layers `ops` may import: contracts and the bottom modules (docs/architecture.md)
BELOW = {"contracts", "dtypes", "layout", "checks", "fill_checks", "shape_checks", "precision", "profiling",
         "settings", "knobs", "knob_parsers", "notices", "hostcopy", "publish", "integrity", "completion",
         "zarr_io"}


def _imports(path: Path) -> set[str]:
    """The first component below `lazyfuel.` of every module `path` imports."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        found |= {n.split(".")[1] for n in names if n.startswith("lazyfuel.")}
    return found


def test_ops_imports_point_down() -> None:
    for path in sorted((PACKAGE / "ops").glob("*.py")):
        upward = _imports(path) - BELOW - {"ops"}
        assert not upward, f"lazyfuel/ops/{path.name} imports the layer(s) above it: {sorted(upward)}"


def test_nothing_below_imports_ops() -> None:
    below = [p for name in BELOW for p in ([PACKAGE / f"{name}.py"] if (PACKAGE / f"{name}.py").exists()
                                           else sorted((PACKAGE / name).rglob("*.py")))]
    assert len(below) > len(BELOW)
    for path in below:
        assert "ops" not in _imports(path), f"{path.relative_to(PACKAGE)} imports lazyfuel.ops (above it)"
