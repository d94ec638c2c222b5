"""benchmarks/ keeps the few a user runs; every probe under benchmarks/probes/ has its line in the
probes' README (the decisions it settled, or whose helper it is), and every benchmark path the
repository names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
USER_RUNS = {"kernels.py", "pipeline.py", "data_path.py", "out_of_core.py", "fft.py", "multi_gpu.py",
             "first_run.py", "threads.py", "gpu_run.sh", "fft_gpu.sh", "BENCHMARKS.md"}
PATH = re.compile(r"benchmarks/[a-z0-9_/]+\.(?:py|sh|comp|md)")


def test_benchmarks_keeps_what_a_user_runs():
    assert {p.name for p in BENCHMARKS.iterdir() if p.is_file()} == USER_RUNS


def test_every_probe_has_its_line_saying_what_it_decided():
    readme = (BENCHMARKS / "probes" / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^- `([a-z0-9_]+\.py)`", readme, flags=re.M))
    assert listed == {p.name for p in (BENCHMARKS / "probes").glob("*.py")}
    for line in re.findall(r"^- `[a-z0-9_]+\.py`.*?(?=^- |\Z)", readme, flags=re.M | re.S):
        assert re.search(r"decisions? \d+", line) or "a helper of" in line, line


def test_every_benchmark_path_the_repository_names_exists():
    named = set()
    for path in [ROOT / "README.md", *ROOT.glob("docs/*.md"), *BENCHMARKS.rglob("*.md"),
                 *BENCHMARKS.rglob("*.sh"), *BENCHMARKS.rglob("*.py"), *ROOT.glob("lazyfuel/**/*.py"),
                 *ROOT.glob("tests/**/*.py")]:
        named |= set(PATH.findall(path.read_text(encoding="utf-8")))
    missing = sorted(n for n in named if not (ROOT / n).is_file())
    assert not missing, missing
