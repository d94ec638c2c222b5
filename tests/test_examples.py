"""Every program in examples/ runs as a user would run it (a fresh interpreter, its own folder
as the working directory) and exits 0; each checks its own result against numpy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))


def test_the_examples_are_there():
    assert {p.name for p in EXAMPLES} >= {"out_of_core_gather.py", "fused_transpose_gather.py",
                                          "distributed_local_cluster.py", "bf16_embedding_lookup.py",
                                          "fft_features.py"}


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(path: Path, tmp_path: Path):
    args = [sys.executable, str(path)]
    if path.name == "out_of_core_gather.py":
        args += ["65536", str(tmp_path)]  # small and in tmp_path; the default is 128 MiB in $TMPDIR
    env = {**os.environ, "PYTHONWARNINGS": "error::UserWarning:distributed.client"}
    done = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, f"{path.name} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    assert done.stdout.strip(), f"{path.name} printed nothing"
