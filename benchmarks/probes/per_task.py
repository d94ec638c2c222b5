"""Where a W1 task's time goes at small chunks, and what importing pageable pages costs (issue 18).

Decided: whether W1 at 16 MiB chunks is bound by the Python work per task (the GIL), by the
device's per-submit cost, or by neither (then threads overlap tasks). Prints, for page-locked x
and out (`lf.empty_pinned`) in `--mib` chunks: ms per task by dask thread count, the device
seconds per program (submit to fence, `lf.profile`), and the top functions by own time of one
compute on the synchronous scheduler (cProfile). A task is one program (`lf.profile`): blocks
smaller than `lf.config.task_bytes` run several to a task (`LAZYFUEL_TASK_BYTES=0`: one each).
Then ms to import and release one pageable array's pages (`allocator.import_host`,
VK_EXT_external_memory_host) by size, the cost a kept import (`kept.py`) pays once.

    python benchmarks/probes/per_task.py [--gib 2] [--mib 16] [--threads 1,4,16]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
os.environ.setdefault("LAZYFUEL_BACKEND", "vulkan")

import lazyfuel as lf

COLS = 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=2.0)
    parser.add_argument("--mib", type=int, default=16)
    parser.add_argument("--threads", default="1,4,16")
    parser.add_argument("--import-mibs", default="16,256,1024")
    args = parser.parse_args()
    from lazyfuel.backends.vulkan import get_pool, register
    register()
    pool = get_pool()
    rows, chunk = int(args.gib * 2**30) // (COLS * 4), (args.mib << 20) // (COLS * 4)
    x = lf.empty_pinned((rows, COLS), np.float32)
    x[:] = np.random.default_rng(0).standard_normal((rows, COLS), dtype=np.float32)
    out = lf.empty_pinned((rows, COLS), np.float32)
    rng = np.random.default_rng(1)
    idx = np.concatenate([s + rng.permutation(min(chunk, rows - s)) for s in range(0, rows, chunk)])
    mask = rng.random((rows, 1)) < 0.5
    y = lf.masked_fill(lf.index_select(lf.from_array(x, chunks=(chunk, COLS)), 0, idx), mask, -1.0)
    blocks = -(-rows // chunk)
    with lf.profile() as counted:
        y.compute(out=out, scheduler="threads", num_workers=4)
    assert out.tobytes() == np.where(mask, np.float32(-1), x[idx]).tobytes()
    tasks = counted.programs  # one program a task; small blocks are grouped (`lf.config.task_bytes`)
    print(f"{pool.label}: {blocks} blocks of {args.mib} MiB (page-locked x and out), {tasks} tasks at 4 "
          f"threads (task_bytes {lf.config.task_bytes})")
    print("| threads | ms per task | GB/s | device s per program (submit to fence) |\n|---|---|---|---|")
    for threads in [int(t) for t in args.threads.split(",") if t]:
        best = None
        for _ in range(3):
            with lf.profile() as p:
                start = time.perf_counter()
                y.compute(out=out, scheduler="threads", num_workers=threads)
                wall = time.perf_counter() - start
            if best is None or wall < best[0]:
                best = (wall, p.device_seconds / max(p.programs, 1), max(p.programs, 1))
        wall, device, programs = best
        gbs = x.nbytes / wall / 1e9
        print(f"| {threads} | {wall / programs * 1e3:.3f} | {gbs:.2f} | {device * 1e3:.3f} ms |", flush=True)
    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.enable()
    with lf.profile() as counted:
        y.compute(out=out, scheduler="sync")
    profile.disable()
    wall = time.perf_counter() - start
    tasks = max(counted.programs, 1)
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(22)
    print(f"\nsync scheduler under cProfile: {wall / tasks * 1e3:.3f} ms per task; top own time:")
    print("\n".join(line for line in text.getvalue().splitlines()[6:] if line.strip()))
    print("\n| pageable MiB | import ms | release ms |\n|---|---|---|")
    for mib in [int(m) for m in args.import_mibs.split(",") if m]:
        a = np.ones(mib << 20, np.uint8)
        start = time.perf_counter()
        allocation = pool.allocator.import_host(a)
        middle = time.perf_counter()
        if allocation is None:
            print(f"| {mib} | refused | - |")
            continue
        pool.allocator.free(allocation)
        released = time.perf_counter() - middle
        print(f"| {mib} | {(middle - start) * 1e3:.1f} | {released * 1e3:.1f} |", flush=True)


if __name__ == "__main__":
    main()
