"""W3 round by round: why the first row data_path times is the slowest (issue 18, W3/W4 item 1).

Decides: whether the first W3 row `benchmarks/data_path.py` times (sessions 7-9: always the
slowest, 9.8-12 ms against 9.5) is slow because of the GPU's clock (the H200 drops its SM clock
within ~2 s of light load), the replay's first (noting) run, fresh allocations of the outputs
(device memory made at ~22 ms a GiB), or Python on the host. x (16 GiB f32, 1 GiB blocks, made by
torch and taken device to device where CUDA shares the GPU; a host array persisted elsewhere),
y = masked_fill(index_select(x, 0, idx), mask (N, 1), -1), `y.persist(device=True)` repeated in
phases, every round recorded (not only the best):

- `first row`: as data_path's first row: `WARM_S` s of persists back to back, then the timed rounds;
- `after idle`: the same y after `--idle-s` s of an idle GPU, timed at once (no warm-up);
- `held again`: the same y, 0.3 s of persists right before the timed rounds;
- `new array`: a new Array of the same graph (data_path's later rows), `WARM_S` s, then the rounds;
- `result alive`: each persist while the previous result is still held (the outputs cannot be
  the cached blocks of the last round).

Per round: wall ms; ms from the persist's start to the first `vkQueueSubmit` (`Batch.start`), the
first submit to the last fence (`Batch.finish` returning), the last fence to the persist's return;
kernel ms (`lf.profile`'s GPU timestamps); device blocks and exportable buffers newly made
(`VulkanAllocator._new_unlocked`, `ExportedMemory.allocate`); whether it was replayed. Per phase the
SM clock range (nvidia-smi every 100 ms, `gpu_clocks.Clocks`).

    python benchmarks/probes/w3_rounds.py [--mib 16384] [--chunk-mib 1024] [--row-bytes 1024]
        [--rounds 8] [--idle-s 3] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
os.environ.setdefault("LAZYFUEL_BACKEND", "vulkan")

import lazyfuel as lf
from benchmarks.probes.gpu_clocks import Clocks, vulkan_uuid
from benchmarks.probes.w3_timeline import CUDA, resident_x

WARM_S = 1.5  # data_path's warm-up before each row
HOLD_S = 0.3  # "held again": load right before the timed rounds

STAMPS: dict[str, Any] = {}


def instrument() -> None:
    """Stamp the first submit, the last fence, new device memory and replays into `STAMPS`."""
    from lazyfuel.backends.vulkan import batch, export, memory
    from lazyfuel.graph import replay

    def wrap(owner: Any, name: str, before: Any = None, after: Any = None) -> None:
        real = getattr(owner, name)

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if before:
                before()
            result = real(*args, **kwargs)
            if after:
                after(result)
            return result

        setattr(owner, name, wrapped)

    def first_submit() -> None:
        STAMPS.setdefault("submit", time.perf_counter())

    def fence(_: Any) -> None:
        STAMPS["fence"] = time.perf_counter()

    def count(key: str) -> Any:
        return lambda: STAMPS.__setitem__(key, STAMPS.get(key, 0) + 1)

    def replayed(result: Any) -> None:
        STAMPS["replayed"] = result is not None

    wrap(batch.Batch, "start", before=first_submit)
    wrap(batch.Batch, "finish", after=fence)
    wrap(memory.VulkanAllocator, "_new_unlocked", before=count("new blocks"))
    real_allocate = export.ExportedMemory.allocate.__func__

    def allocate(cls: Any, *args: Any, **kwargs: Any) -> Any:
        count("new exported")()
        return real_allocate(cls, *args, **kwargs)

    export.ExportedMemory.allocate = classmethod(allocate)
    wrap(replay.Replay, "run", after=replayed)


def one_round(y: Any, keep: list[Any] | None) -> dict:
    """One persist, recorded; the result dropped before it (or kept in `keep`, then dropped after)."""
    STAMPS.clear()
    start_epoch = time.time()
    start = time.perf_counter()
    with lf.profile() as p:
        kept = y.persist(device=True)
    end = time.perf_counter()
    if keep is not None:
        keep.append(kept)
        del keep[:-1]  # the previous result goes only now, after this one was made
    del kept
    submit, fence = STAMPS.get("submit", start), STAMPS.get("fence", end)
    return {"t": start_epoch, "wall": (end - start) * 1e3, "to_submit": (submit - start) * 1e3,
            "device": (fence - submit) * 1e3, "tail": (end - fence) * 1e3,
            "kernels": p.kernel_seconds * 1e3, "blocks": STAMPS.get("new blocks", 0),
            "exported": STAMPS.get("new exported", 0), "replayed": STAMPS.get("replayed", False)}


def phase(name: str, y: Any, warm_s: float, rounds: int, clocks: Clocks, idle_s: float = 0.0,
          keep_alive: bool = False) -> dict:
    """`warm_s` s of persists, recorded, then `rounds` recorded rounds; printed round by round."""
    if idle_s:
        time.sleep(idle_s)
    keep: list[Any] | None = [] if keep_alive else None
    t0 = time.time()
    warm = []
    end = time.perf_counter() + warm_s
    while time.perf_counter() < end:
        warm.append(one_round(y, keep))
    t1 = time.time()
    timed = [one_round(y, keep) for _ in range(rounds)]
    t2 = time.time()
    if keep:
        keep.clear()
    clocks.mark(f"{name} warm-up", t0, t1)
    clocks.mark(f"{name} timed", t1, t2)
    print(f"\n## {name}: {len(warm)} warm-up rounds in {warm_s:g} s, then {rounds} timed")
    if warm:
        groups = [warm[i:i + max(1, len(warm) // 8)] for i in range(0, len(warm), max(1, len(warm) // 8))]
        print("  warm-up by group (rounds, median wall / device ms, replayed, new blocks): " + "; ".join(
            f"{len(g)}: {statistics.median(r['wall'] for r in g):.2f} / "
            f"{statistics.median(r['device'] for r in g):.2f} "
            f"{sum(r['replayed'] for r in g)} {sum(r['blocks'] + r['exported'] for r in g)}" for g in groups))
    print("  | round | wall ms | to 1st submit | 1st submit to last fence | after last fence | kernels | "
          "new blocks / exported | replayed |")
    for i, r in enumerate(timed):
        print(f"  | {i} | {r['wall']:.2f} | {r['to_submit']:.2f} | {r['device']:.2f} | {r['tail']:.2f} | "
              f"{r['kernels']:.2f} | {r['blocks']} / {r['exported']} | {r['replayed']} |")
    walls = [r["wall"] for r in timed]
    summary = {"best": min(walls), "median": statistics.median(walls),
               "device_median": statistics.median(r["device"] for r in timed),
               "to_submit_median": statistics.median(r["to_submit"] for r in timed),
               "tail_median": statistics.median(r["tail"] for r in timed)}
    print(f"  {name}: best {summary['best']:.2f} ms, median {summary['median']:.2f}; medians: to the first "
          f"submit {summary['to_submit_median']:.2f}, device {summary['device_median']:.2f}, after the "
          f"last fence {summary['tail_median']:.2f}", flush=True)
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=16384 if CUDA else 64)
    ap.add_argument("--chunk-mib", type=int, default=1024 if CUDA else 4)
    ap.add_argument("--row-bytes", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--idle-s", type=float, default=3.0)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", tempfile.gettempdir())))
    args = ap.parse_args()
    instrument()
    cols, rows = args.row_bytes // 4, (args.mib << 20) // args.row_bytes
    chunk_rows = (args.chunk_mib << 20) // args.row_bytes
    from lazyfuel.backends.vulkan import get_pool

    clocks = Clocks(args.out / "w3_rounds_clocks.csv")
    x, _xt = resident_x(rows, cols, chunk_rows)  # the torch tensor kept, as data_path keeps it
    rng = np.random.default_rng(args.row_bytes)
    idx = np.concatenate([rng.permutation(min(chunk_rows, rows - lo)) + lo
                          for lo in range(0, rows, chunk_rows)])
    mask = rng.random((rows, 1)) < 0.5

    def fresh() -> Any:
        return x.index_select(0, idx).masked_fill(mask, -1.0)

    y = fresh()
    results = {
        "first row": phase("first row", y, WARM_S, args.rounds, clocks),
        "after idle": phase("after idle", y, 0.0, args.rounds, clocks, idle_s=args.idle_s),
        "held again": phase("held again", y, HOLD_S, args.rounds, clocks),
        "new array": phase("new array", fresh(), WARM_S, args.rounds, clocks),
        "result alive": phase("result alive", y, HOLD_S, args.rounds, clocks, keep_alive=True),
    }
    found = clocks.stop(vulkan_uuid(get_pool()))
    print("\n| phase | best ms | median ms | to 1st submit | device | after last fence | SM clock (timed) |")
    print("|---|---|---|---|---|---|---|")
    for name, s in results.items():
        print(f"| {name} | {s['best']:.2f} | {s['median']:.2f} | {s['to_submit_median']:.2f} | "
              f"{s['device_median']:.2f} | {s['tail_median']:.2f} | {found.get(f'{name} timed', '-')} |")
    for name, text in found.items():
        print(f"  clocks {name}: {text}")


if __name__ == "__main__":
    main()
