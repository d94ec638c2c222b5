"""W3's host time on tiny resident blocks, two trees side by side (issue 18, W3 host time).

Decides: whether a change to the per-persist host work (submits per batch, per-block Python,
the work before the first task, a replay of the last run: `graph/replay.py`) makes
`persist(device=True)` of W3's graph faster where the kernels cost next to nothing (tiny blocks
on lavapipe: host time is all there is). x (16 blocks of `--rows` x `--cols` f32) is persisted,
then `y = x.index_select(0, idx).masked_fill(mask (N,1), -1)` (idx permuting rows inside each
block) is persisted again and again; printed per tree and scheduler: the best and median ms of
one persist, the ms from its start to its first submit (`DevicePool.submit` wrapped to stamp the
time), and the host's ms per block: the persist's wall time less its time inside
`vkQueueSubmit` and the fence waits (`DevicePool.submit` / `wait`, timed), over the blocks: the
Python a block costs, whichever path ran it. Each tree runs in its own process (its `lazyfuel`
first on `sys.path`); the result's bits are compared with numpy.

    python benchmarks/probes/w3_host.py [--trees /work/main,.] [--rows 64] [--cols 256] [--reps 40]
        [--per-submit 0,1,2,4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def measure(rows: int, cols: int, reps: int, per_submit: int) -> dict:
    """In this process: {scheduler: (best ms, median ms, median ms to the first submit, median
    host ms per block)}; `per_submit` > 0 sets `executor.PROGRAMS_PER_SUBMIT` where the tree has it."""
    import numpy as np

    import lazyfuel as lf
    from lazyfuel.backends.vulkan import executor
    from lazyfuel.backends.vulkan.pool import DevicePool

    first: list[float] = []
    in_driver: list[float] = []
    real_submit, real_wait = DevicePool.submit, DevicePool.wait

    def stamped(self: DevicePool, context: object) -> None:
        start = time.perf_counter()
        first.append(start)
        try:
            real_submit(self, context)
        finally:
            in_driver.append(time.perf_counter() - start)

    def timed_wait(self: DevicePool, context: object) -> None:
        start = time.perf_counter()
        try:
            real_wait(self, context)
        finally:
            in_driver.append(time.perf_counter() - start)

    if per_submit > 0 and hasattr(executor, "PROGRAMS_PER_SUBMIT"):
        executor.PROGRAMS_PER_SUBMIT = per_submit
    DevicePool.submit, DevicePool.wait = stamped, timed_wait  # timers around the real calls
    blocks = 16
    rng = np.random.default_rng(3)
    xh = rng.standard_normal((rows * blocks, cols)).astype(np.float32)
    x = lf.from_array(xh, chunks=(rows, cols)).persist(device=True)
    idx = np.concatenate([rng.permutation(rows) + b * rows for b in range(blocks)])
    mask = rng.random((rows * blocks, 1)) < 0.5
    y = x.index_select(0, idx).masked_fill(mask, -1.0)
    want = np.where(mask, np.float32(-1.0), xh[idx])
    got = np.asarray(y.compute(device=True))
    if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
        raise AssertionError("the persisted result differs from numpy")
    out = {}
    for label, kw in (("threads", {}), ("sync", {"scheduler": "sync"})):
        walls, to_first, per_block = [], [], []
        for rep in range(reps + 5):
            first.clear()
            in_driver.clear()
            start = time.perf_counter()
            held = y.persist(device=True, **kw)
            wall = time.perf_counter() - start
            del held
            if rep >= 5:
                walls.append(wall * 1e3)
                to_first.append((first[0] - start) * 1e3)
                per_block.append((wall - sum(in_driver)) / blocks * 1e3)
        out[label] = (min(walls), float(np.median(walls)), float(np.median(to_first)),
                      float(np.median(per_block)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", default="/work/main,.")
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--cols", type=int, default=256)
    parser.add_argument("--reps", type=int, default=40)
    parser.add_argument("--per-submit", default="0",
                        help="programs per submit, comma-separated runs (0: the tree's default)")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child: this tree
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.rows, args.cols, args.reps, int(args.per_submit))))
        return
    env = {**os.environ, "LAZYFUEL_BACKEND": os.environ.get("LAZYFUEL_BACKEND", "vulkan")}
    print(f"lavapipe-sized W3: 16 blocks of {args.rows} x {args.cols} f32, {args.reps} persists each")
    print(f"{'tree':<28} {'scheduler':<9} {'best ms':>8} {'median ms':>10} {'to 1st submit':>14} "
          f"{'host ms/block':>14}")
    for tree, per_submit in [(t, n) for t in args.trees.split(",") for n in args.per_submit.split(",")]:
        root = os.path.abspath(tree)
        child = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {root!r}); "
                                "import runpy; sys.argv = sys.argv[:1] + sys.argv[1:]; "
                                f"runpy.run_path({os.path.abspath(__file__)!r}, run_name='__main__')",
                                "--one", "--rows", str(args.rows), "--cols", str(args.cols),
                                "--reps", str(args.reps), "--per-submit", per_submit],
                               env=env, capture_output=True, text=True, check=True, cwd=root)
        result = json.loads(child.stdout.strip().splitlines()[-1])
        for label, (best, median, to_first, per_block) in result.items():
            name = tree if per_submit == "0" else f"{tree} ({per_submit}/submit)"
            print(f"{name:<28} {label:<9} {best:>8.2f} {median:>10.2f} {to_first:>14.2f} {per_block:>14.3f}")


if __name__ == "__main__":
    main()
