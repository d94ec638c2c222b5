"""Is `auto` right on the first run? Issue 18 item 3 on this machine, with an empty judge cache.

Each cell is one fresh process with `LAZYFUEL_CACHE_DIR` pointing at an empty temporary
directory (no `lazyfuel judge` measurement, no tuning: the planner prices with its priors alone)
and `LAZYFUEL_BACKEND` set to `auto`, `cpu` or `vulkan`. Workloads (issue 18's, scaled down):

- W1 select + fill: x = (N, 1024) f32 of `--w1-mib` MiB in chunks of `--w1-chunk-mib` MiB,
  y = masked_fill(index_select(x, 0, idx), mask (N, 1), -1), idx permuting the rows inside each chunk;
- W2 random gather: a (R, 256) f32 table of `--w2-mib` MiB in `--w2-chunks` chunks, `--w2-ids`
  random int64 row ids, y = index_select(table, 0, ids).

Both run `y.compute(out=reused)`: once cold (`first`), then `--rounds` times (`best`); every
result is compared bit for bit with numpy. `up` is the bytes the device read from the host per
compute (`lf.profile`), `where` the backends that ran programs. The table ends with `auto`'s best
over the faster forced backend's best (acceptance: <= 1.5).

    python benchmarks/first_run.py              # W1 256 MiB / 32 MiB chunks, W2 512 MiB / 8 chunks, 128k ids
    python benchmarks/first_run.py --quick      # a smaller smoke run

Figures: BENCHMARKS.md, "first_run".
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))  # this checkout's lazyfuel

BACKENDS = ("auto", "cpu", "vulkan")


def w1(args: argparse.Namespace):
    """x, the lazy y, and numpy's answer for W1."""
    import lazyfuel as lf

    rows = args.w1_mib * 2**20 // 4096
    chunk = args.w1_chunk_mib * 2**20 // 4096
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, 1024), dtype=np.float32)
    idx = np.concatenate([s + rng.permutation(min(chunk, rows - s)) for s in range(0, rows, chunk)])
    mask = rng.random((rows, 1)) < 0.5
    lx = lf.from_array(x, chunks=(chunk, 1024))
    y = lx.index_select(0, idx).masked_fill(lf.from_array(mask, chunks=(chunk, 1)), -1.0)
    return y, np.where(mask, np.float32(-1), x[idx])


def w2(args: argparse.Namespace):
    """The lazy y and numpy's answer for W2."""
    import lazyfuel as lf

    rows = args.w2_mib * 2**20 // 1024
    rng = np.random.default_rng(0)
    table = rng.standard_normal((rows, 256), dtype=np.float32)
    ids = rng.integers(0, rows, args.w2_ids, dtype=np.int64)
    y = lf.from_array(table, chunks=(-(-rows // args.w2_chunks), 256)).index_select(0, ids)
    return y, table[ids]


def child(args: argparse.Namespace) -> None:
    """One cell: build, compute cold, then the rounds; print one JSON line."""
    import lazyfuel as lf

    y, expected = {"w1": w1, "w2": w2}[args.child](args)
    out = np.empty(y.shape, y.dtype)
    with lf.profile() as p:
        start = time.perf_counter()
        y.compute(out=out)
        first = time.perf_counter() - start
    if out.tobytes() != expected.tobytes():
        raise SystemExit(f"{args.child} on {os.environ.get('LAZYFUEL_BACKEND')}: differs from numpy")
    times = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        y.compute(out=out)
        times.append(time.perf_counter() - start)
    where = sorted({backend for backend, _ in p.where})
    print(json.dumps({"first": first, "best": min(times), "up": p.bytes_uploaded,
                      "where": where, "nbytes": int(out.nbytes)}))


def cell(workload: str, backend: str, args: argparse.Namespace) -> dict:
    """Run one cell in a fresh process with an empty judge cache."""
    with tempfile.TemporaryDirectory(prefix="lazyfuel-empty-cache-") as empty:
        env = dict(os.environ, LAZYFUEL_CACHE_DIR=empty, LAZYFUEL_BACKEND=backend)
        cmd = [sys.executable, __file__, "--child", workload, *sys.argv[1:]]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{workload} {backend} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--w1-mib", type=int, default=256)
    parser.add_argument("--w1-chunk-mib", type=int, default=32)
    parser.add_argument("--w2-mib", type=int, default=512)
    parser.add_argument("--w2-chunks", type=int, default=8)
    parser.add_argument("--w2-ids", type=int, default=131072)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="W1 64 MiB / 8 MiB, W2 128 MiB, 32k ids")
    parser.add_argument("--child", choices=("w1", "w2"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.w1_mib, args.w1_chunk_mib, args.w2_mib, args.w2_ids = 64, 8, 128, 32768
    if args.child:
        child(args)
        return
    print("| workload | backend | first s | best s | up MiB | where |")
    print("| --- | --- | --- | --- | --- | --- |")
    for workload in ("w1", "w2"):
        got = {b: cell(workload, b, args) for b in BACKENDS}
        for b in BACKENDS:
            r = got[b]
            print(f"| {workload} | {b} | {r['first']:.3f} | {r['best']:.3f} | "
                  f"{r['up'] / 2**20:.1f} | {', '.join(r['where'])} |", flush=True)
        faster = min(got["cpu"]["best"], got["vulkan"]["best"])
        print(f"| {workload} | auto / faster forced | | {got['auto']['best'] / faster:.2f}x | | |",
              flush=True)


if __name__ == "__main__":
    main()
