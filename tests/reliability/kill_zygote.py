"""A process that forks writers for the kill tests (`test_kills.py`), so each killed writer starts in
milliseconds rather than paying Python's and lazyfuel's imports again.

It imports lazyfuel, zarr and the CLI and plans and runs one small op on the cpu backend (the
registry and planner are built once, here), but touches no device, no zarr store and starts no
thread (forking after any of these is unsafe: zarr's event loop runs in a thread), then reads
one JSON job per line on stdin. For each it forks a child that runs the job and leaves with
os._exit, prints `pid N`, waits for the child (killed or done) and prints
`status S` (os.waitpid's status). Jobs: {"job": "to_zarr", "path", "seed", "overwrite"} writes
`kill_source(seed)` with `Array.to_zarr`; {"job": "run", "argv"} runs `lazyfuel.cli.main(argv)`.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

import numpy as np
import zarr  # noqa: F401  (imported before forking: children start writing at once)

import lazyfuel as lf
from lazyfuel import cli

SHAPE, CHUNKS = (1024, 64), (64, 64)


def kill_source(seed: int) -> lf.Array:
    """What the to_zarr jobs write: rows of a seeded table picked and masked (16 chunks)."""
    rng = np.random.default_rng(seed)
    table = rng.standard_normal(SHAPE).astype(np.float32)
    rows = rng.integers(0, SHAPE[0], SHAPE[0])
    return lf.masked_fill(lf.index_select(lf.from_array(table, chunks=CHUNKS), 0, rows), table[rows] > 1, 0.0)


def expected(seed: int) -> np.ndarray:
    """`kill_source(seed)` computed by numpy."""
    rng = np.random.default_rng(seed)
    table = rng.standard_normal(SHAPE).astype(np.float32)
    rows = rng.integers(0, SHAPE[0], SHAPE[0])
    return np.where(table[rows] > 1, np.float32(0), table[rows])


def _job(job: dict) -> int:
    if job["job"] == "to_zarr":
        kill_source(job["seed"]).to_zarr(job["path"], overwrite=job["overwrite"])
        return 0
    with open(os.devnull, "w") as quiet:
        sys.stdout = quiet
        return cli.main(job["argv"])


def main() -> None:
    assert os.environ.get("LAZYFUEL_BACKEND") == "cpu"
    kill_source(0).compute(scheduler="sync")
    for line in sys.stdin:
        job = json.loads(line)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _job(job)
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stderr.flush()
                os._exit(code)
        print(f"pid {pid}", flush=True)
        _, status = os.waitpid(pid, 0)
        print(f"status {status}", flush=True)


if __name__ == "__main__":
    main()
