"""W2 on the GPU as a timeline: where each thread spends one warm `compute(device=True)`.

Decides: where the ~14 ms a warm in-place W2 compute spends beside its kernel (issue 18 W2: 1M
random int64 ids over a pageable (rows, 256) f32 table of `--gib` GiB in 16 chunks, the result
kept on the GPU, the table already imported) goes: the lowering and the held run (main thread),
dask's scheduler, each task's way and prices (`touched.streamed_where_cheaper`, `kept_ways`), the
ids' range check (`checked_indices`), the result's reservation, the table's kept imports
(`KeptImports.hold`), the read's recording and submit, the fence wait (the device), and the
result's assembly into one DeviceArray (`resident.assembled`). One compute is timed with
wrappers (`w3_timeline._wrap`), each event stamped with `time.perf_counter()` and its thread,
printed as ms from the compute's start per thread, with the device ms of each batch; every
result checked bit for bit on its first and last rows against numpy. `--way` forces
`config.host_rows` (`in-place` by default: W2's warm way once imported); `--chunks` the table's
chunks (16: W2's, 4 blocks of result; 4: one block, one dispatch and nothing to assemble).
`--no-turns` and `--assemble` measure the way before branch w2place, for the comparison: every
task readying its read at once (`host_gather.SubmitTurn` made a no-op here), and the blocks in
allocations of their own assembled after the last kernel (`graph/placed.py` given no holder).

`--first` times a fresh process's first computes instead, as data_path.py's W2 child runs them
(run it with `LAZYFUEL_CACHE_DIR` a new folder: an empty judge cache): `lf.explain(y,
device=True)` (the pool made, its link probed, the blocks planned), then `--rounds` computes
with no warm-up, the timeline of the first two printed; beside the calls above it stamps the
pool's making, the link probe, each plan the planner builds (a miss of its cache), each block
the allocator makes (bytes, use, shared or its own), each piece's staging and take of the
streamed way, and each host range imported. Decides where W2's first `compute(device=True)`
(74-121 ms on the H200 in session 15, the warm ones 35-57) spends the difference.

    python benchmarks/probes/w2_timeline.py [--gib 4] [--ids 1048576] [--rounds 5] [--warm-s 1.5]
        [--way in-place] [--chunks 16] [--no-turns] [--assemble] [--first]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from contextlib import contextmanager

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.dirname(__file__))

import dask
from w3_timeline import _print_timeline, _wrap, recorded

import lazyfuel as lf

COLS, CHUNKS = 256, 16


def instrument() -> None:
    """Wrap the calls one W2 compute(device=True) makes (each name as the caller looks it up)."""
    from lazyfuel import array
    from lazyfuel.backends.vulkan import batch, executor, host_gather, kept, residency
    from lazyfuel.graph import held_run, task, touched

    _wrap(array.Array, "_persisted_on_device", "persist")
    _wrap(array, "assembled", "assemble")
    _wrap(array, "on_device", "lower")
    _wrap(held_run.HeldRun, "run", "held run")
    _wrap(dask.threaded, "get", "scheduler")
    _wrap(task, "streamed_where_cheaper", "task's way")
    _wrap(touched, "kept_ways", "prices")
    _wrap(executor.VulkanExecutor, "streamed_before", "seen")
    _wrap(executor.VulkanExecutor, "unkept_bytes", "unkept")
    _wrap(host_gather, "gather_in_place", "gather_in_place")
    _wrap(host_gather, "checked_indices", "ids checked")
    _wrap(host_gather, "_read", "read")
    _wrap(residency.ResidentBlock, "reserve", "reserve")
    _wrap(kept.KeptImports, "hold", "hold")
    _wrap(batch.Batch, "run", "submit+wait")
    _wrap(batch.Batch, "start", "submit")
    _wrap(batch.Batch, "finish", "wait", lambda b, _: f"device {b.device_seconds * 1e3:.2f} ms")


def instrument_first() -> None:
    """Also wrap what only a first compute does much of (see the module docstring)."""
    from lazyfuel.backends.vulkan import batch, compute_pipelines, link_probe, memory, pool, streamed
    from lazyfuel.planner import plan

    _wrap(pool.DevicePool, "__init__", "pool made")
    _wrap(link_probe, "measure", "link probe")
    _wrap(plan._Builder, "build", "plan built", lambda b, _: str(b.backend))
    _wrap(memory.VulkanAllocator, "_new_unlocked", "new block",
          lambda _, a: f"{a[1] / 2**20:.0f} MiB {a[2].name.lower()}")
    _wrap(memory.VulkanAllocator, "import_host", "import")
    _wrap(batch.Batch, "staging", "staging")
    _wrap(streamed, "take_rows", "take")
    _wrap(compute_pipelines.Pipelines, "_create", "pipeline made", lambda _, a: str(a[1]))


def first_computes(y: lf.Array, want: tuple[bytes, bytes], rounds: int) -> None:
    """`--first`: explain, then `rounds` computes with no warm-up, the first two's timelines."""
    instrument_first()
    start, wall, _ = recorded("explain", lambda: lf.explain(y, device=True))
    print(f"explain(device=True) in a fresh process: {wall * 1e3:.2f} ms", flush=True)
    _print_timeline(start)
    walls = []
    for k in range(rounds):
        start, wall, r = recorded("compute", lambda: y.compute(device=True))
        walls.append(wall)
        host = np.asarray(r)
        if (host[:1024].tobytes(), host[-1024:].tobytes()) != want:
            raise SystemExit("differs from numpy")
        print(f"\ncompute {k}: {wall * 1e3:.2f} ms", flush=True)
        if k < 2:
            _print_timeline(start)
        del r, host
    print("first computes: " + " ".join(f"{w * 1e3:.1f}" for w in walls) + " ms")


def before_w2place(no_turns: bool, assemble: bool) -> str:
    """Undo this branch's changes for a comparison (see the module docstring); their names."""
    from lazyfuel import array
    from lazyfuel.backends.vulkan import host_gather

    if no_turns:
        class _Free:
            give = staticmethod(lambda: None)

        @contextmanager
        def free(self):
            yield _Free()
        host_gather.SubmitTurn.taken = free
    if assemble:
        array.result_holder = lambda device: None
    return ", ".join(n for n, on in (("no turns", no_turns), ("assembled", assemble)) if on) or "w2place"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=4.0)
    ap.add_argument("--ids", type=int, default=1 << 20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warm-s", type=float, default=1.5)
    ap.add_argument("--way", default="in-place", choices=("in-place", "streamed", "auto"))
    ap.add_argument("--chunks", type=int, default=CHUNKS, help="the table's chunks")
    ap.add_argument("--no-turns", action="store_true", help="every task readies its read at once")
    ap.add_argument("--assemble", action="store_true", help="blocks assembled after the kernels")
    ap.add_argument("--first", action="store_true", help="a fresh process's first computes, no warm-up")
    args = ap.parse_args()
    variant = before_w2place(args.no_turns, args.assemble)
    rows = int(args.gib * 2**30) // (COLS * 4)
    table = np.empty((rows, COLS), np.float32)
    table[:] = np.random.default_rng(1).standard_normal((1, COLS), dtype=np.float32)
    table[:, 0] = np.arange(rows, dtype=np.float32)
    ids = np.random.default_rng(4).integers(0, rows, args.ids, dtype=np.int64)
    y = lf.index_select(lf.from_array(table, chunks=(-(-rows // args.chunks), COLS)), 0, ids)
    want = (table[ids[:1024]].tobytes(), table[ids[-1024:]].tobytes())
    instrument()
    walls = []
    if args.first:
        with lf.config(host_rows=args.way):
            first_computes(y, want, args.rounds)
        return 0
    with lf.config(host_rows=args.way):
        end = time.perf_counter() + args.warm_s
        while time.perf_counter() < end or not walls:  # imports the table, warms the clocks
            r = y.compute(device=True)
            host = np.asarray(r)
            if (host[:1024].tobytes(), host[-1024:].tobytes()) != want:
                raise SystemExit("differs from numpy")
            walls.append(0.0)
            del r, host
        walls.clear()
        for k in range(args.rounds):
            start, wall, r = recorded("compute", lambda: y.compute(device=True))
            walls.append(wall)
            print(f"\nW2 {args.gib:g} GiB in {args.chunks} chunks ({len(y.to_dask().chunks[0])} result "
                  f"block(s)), {args.way}, {variant}, round {k}: {wall * 1e3:.2f} ms", flush=True)
            if k == args.rounds - 1 or wall == min(walls):
                _print_timeline(start)
            del r
    print(f"W2 {args.gib:g} GiB in {args.chunks} chunks, {args.way}, {variant}: "
          f"best {min(walls) * 1e3:.2f} ms, median {sorted(walls)[len(walls) // 2] * 1e3:.2f}, rounds "
          + " ".join(f"{w * 1e3:.1f}" for w in walls))
    return 0


if __name__ == "__main__":
    sys.exit(main())
