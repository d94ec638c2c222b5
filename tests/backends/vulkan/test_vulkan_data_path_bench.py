"""benchmarks/data_path.py --quick runs here (what CI and users without a GPU can run): every
configuration bit-equal to numpy (W1 and W2), lf.profile's bytes per link written, no validation message."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_quick_data_path_benchmark_runs(tmp_path):
    out = tmp_path / "data_path.json"
    env = {**os.environ, "LAZYFUEL_BACKEND": "vulkan"}
    script = ROOT / "benchmarks" / "data_path.py"
    done = subprocess.run([sys.executable, str(script), "--quick", "--json", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "| 16 | lazyfuel, pageable |" in done.stdout and "validation messages: 0" in done.stdout
    results = json.loads(out.read_text())["results"]
    x_bytes = 128 << 20
    for mib in (8, 16, 32):
        for kind in ("pageable", "page-locked"):
            row = results[f"{mib} lazyfuel, {kind}"]
            assert row["down"] == x_bytes and row["up"] >= x_bytes  # x up (+ indices, mask), y down
    w2 = ("lazyfuel", "lazyfuel, compute(device=True)", f"numpy take ({os.cpu_count()} threads)")
    for name in w2:  # W2: each in a fresh process
        row = results[f"w2 0.0625 {name}"]
        assert "failed" not in row and row["first_s"] > 0 and row["again_s"] > 0, row
    assert results["w2 0.0625 lazyfuel"]["picked"].startswith("program on ")
    assert len(results["w2 0.0625 lazyfuel"]["firsts_s"]) == 2  # the compared pair: a process each time


def test_resident_workloads_asked_with_host_ones_run_in_a_process_of_their_own(tmp_path):
    out = tmp_path / "data_path.json"
    env = {**os.environ, "LAZYFUEL_BACKEND": "vulkan"}
    script = ROOT / "benchmarks" / "data_path.py"
    done = subprocess.run([sys.executable, str(script), "--quick", "--workloads", "w1,w4", "--json",
                           str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.count("validation messages: 0") == 2  # the resident process's, then this one's
    assert done.stdout.index("### W4") < done.stdout.index("| 16 | lazyfuel, pageable |")  # W4 first
    found = json.loads(out.read_text())
    assert "failed" not in found["resident"] and found["resident"]["w4"]
    assert "16 lazyfuel, pageable" in found["results"]
