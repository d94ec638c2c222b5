"""W1 page-locked as a timeline of its programs, round by round beside torch at its best (issue 18).

Decided: why W1 at 8 MiB chunks on page-locked x and out read 22-35 GB/s from one process to the
next (session 12) while 64 MiB read 38-43 and torch at its best 34-41: whether the compute is
host-bound (few programs in flight, threads between a fence and their next submit), device- or
link-bound (every thread waiting on a fence, each program slow), or paying a fixed cost before
its first submit or after its last fence. x (N, 1024) f32 of `--gib` GiB and the result from
`lf.empty_pinned`, y = masked_fill(index_select(x, 0, idx), mask (N, 1), -1), idx permuting rows
inside each chunk (as benchmarks/data_path.py's W1). The GPU is kept busy `--warm-s` first.

For each variant (chunk MiB x dask threads x `task_bytes` x tasks per thread at least (the
grouping's floor, 2 in the library) x recording gate (0: none; k: at most k threads between a
program's first upload and its submit, a semaphore wrapped around `VulkanExecutor._record` and
`Batch.start`: does fewer threads contending for the GIL while recording help?) x `prep_slots`
(`--prep-gates`; the library's turns at a task's whole Python, decision 112; 0 off)), `--rounds` rounds,
each a lazyfuel `compute(out=)` then (CUDA only) torch at its best on the same chunks (pinned
tensors, 3 streams, `non_blocking`): per round the ratio of the two walls, and for lazyfuel, from
`Batch.start` and the pool's fence wait wrapped for the round: programs, ms before the first submit
(`lead`), ms after the last fence (`tail`), the share of the wall with a program in flight (`busy`),
the programs in flight on average (`depth`), ms per program submit -> fence (`prog`), ms a thread
spends between its last fence and its next submit (`host`: its next task's Python, dask and the
GIL), and the queue slots used. Medians over the rounds; the result is checked bit for bit.

    python benchmarks/probes/w1_timeline.py [--gib 4] [--mibs 8,64] [--threads 16,8]
                                            [--task-mibs 64,128] [--per-thread 2,1] [--gates 0,4]
                                            [--prep-gates 0,1] [--rounds 8]
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import threading
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
os.environ.setdefault("LAZYFUEL_BACKEND", "vulkan")

from data_path import COLS, CUDA, check, make_inputs, permutation, torch, torch_best_run, torch_best_tensors

import lazyfuel as lf
from lazyfuel.backends.vulkan import batch as batch_module
from lazyfuel.backends.vulkan import get_pool, register
from lazyfuel.backends.vulkan.executor import VulkanExecutor
from lazyfuel.backends.vulkan.pool import DevicePool
from lazyfuel.graph import lower


class Timeline:
    """Wraps `Batch.start` and `DevicePool.wait` while recording: per program the thread, its
    queue slot, the submit's start and end and the fence wait's start and end."""

    def __init__(self) -> None:
        self.events: list[tuple[int, int, float, float, float, float]] = []
        self._open: dict[int, list[float]] = {}
        self._lock = threading.Lock()
        self._start, self._wait = batch_module.Batch.start, DevicePool.wait

    def __enter__(self) -> Timeline:
        timeline, start, wait = self, self._start, self._wait

        def timed_start(batch: Any) -> None:
            before = time.perf_counter()
            start(batch)
            timeline._open[id(batch.context)] = [before, time.perf_counter(), batch.context.queue_slot]

        def timed_wait(pool: Any, context: Any) -> None:
            before = time.perf_counter()
            wait(pool, context)
            after = time.perf_counter()
            begun, submitted, slot = timeline._open.pop(id(context), [before, before, -1])
            with timeline._lock:
                timeline.events.append((threading.get_ident(), int(slot), begun, submitted, before, after))

        batch_module.Batch.start, DevicePool.wait = timed_start, timed_wait
        return self

    def __exit__(self, *exc: object) -> None:
        batch_module.Batch.start, DevicePool.wait = self._start, self._wait

    def summary(self, begin: float, end: float) -> dict[str, float]:
        """The round's figures (see the module docstring) between `begin` and `end`."""
        events = sorted(self.events, key=lambda e: e[2])
        wall = end - begin
        spans = sorted((e[3], e[5]) for e in events)
        busy, reach = 0.0, begin
        for low, high in spans:
            if high > reach:
                busy += high - max(low, reach)
                reach = high
        host = []
        last_end: dict[int, float] = {}
        for thread, _, begun, _, _, after in events:
            host.append(begun - last_end.get(thread, begin))
            last_end[thread] = after
        return {"programs": len(events), "lead": (events[0][3] - begin) * 1e3 if events else 0.0,
                "tail": (end - max(e[5] for e in events)) * 1e3 if events else 0.0,
                "busy": busy / wall, "depth": sum(h - lo for lo, h in spans) / wall,
                "prog": statistics.median(h - lo for lo, h in spans) * 1e3 if spans else 0.0,
                "host": statistics.median(host) * 1e3 if host else 0.0,
                "slots": len({e[1] for e in events}), "wall": wall}


class Gate:
    """At most `k` threads between their first `_record` and their `Batch.start` (0: no gate)."""

    def __init__(self, k: int) -> None:
        self.k, self._held = k, threading.local()
        self._semaphore = threading.Semaphore(max(k, 1))
        self._record, self._start = VulkanExecutor._record, batch_module.Batch.start

    def __enter__(self) -> Gate:
        if not self.k:
            return self
        gate, record, start = self, self._record, self._start

        def gated_record(executor: Any, *args: Any, **kwargs: Any) -> Any:
            if not getattr(gate._held, "on", False):
                gate._semaphore.acquire()
                gate._held.on = True
            return record(executor, *args, **kwargs)

        def gated_start(batch: Any) -> None:
            try:
                start(batch)
            finally:
                if getattr(gate._held, "on", False):
                    gate._held.on = False
                    gate._semaphore.release()

        VulkanExecutor._record, batch_module.Batch.start = gated_record, gated_start
        return self

    def __exit__(self, *exc: object) -> None:
        VulkanExecutor._record, batch_module.Batch.start = self._record, self._start


class PerThread:
    """The grouping's floor of tasks per worker thread set to `n` while entered (2 in lower.py)."""

    def __init__(self, n: int) -> None:
        self.n, self._grouped = n, lower.grouped

    def __enter__(self) -> PerThread:
        real, n = self._grouped, self.n
        lower.grouped = lambda root, target, min_tasks: real(root, target, min_tasks // 2 * n)
        return self

    def __exit__(self, *exc: object) -> None:
        lower.grouped = self._grouped


def warm(seconds: float, x: np.ndarray) -> None:
    """Keep the GPU busy `seconds` (its clocks up): torch's device copies, or lazyfuel computes."""
    until = time.perf_counter() + seconds
    if CUDA:
        a = torch.empty(1 << 28, device="cuda")
        while time.perf_counter() < until:
            a.mul_(1.0)
            torch.cuda.synchronize()
        return
    part = x[:1 << 12]
    y = lf.masked_fill(lf.from_array(part), np.zeros((len(part), 1), bool), 0.0)
    while time.perf_counter() < until:
        y.compute()


def variant(x: np.ndarray, out: np.ndarray, mask: np.ndarray, mib: int, threads: int, task_mib: int,
            per_thread: int, gate: int, prep: int, rounds: int, tensors: dict[str, Any]) -> None:
    """One row: `rounds` rounds of lazyfuel then torch, interleaved; medians printed."""
    chunk_rows = max(1, (mib << 20) // (COLS * 4))
    idx = permutation(len(x), chunk_rows, chunk_rows)
    y = lf.masked_fill(lf.index_select(lf.from_array(x, chunks=(chunk_rows, COLS)), 0, idx), mask, -1.0)
    idx_pinned = torch.from_numpy(idx).pin_memory() if tensors else None
    rows: list[dict[str, float]] = []
    ratios: list[float] = []
    with lf.config(task_bytes=task_mib << 20, prep_slots=prep), PerThread(per_thread), Gate(gate):
        y.compute(out=out, scheduler="threads", num_workers=threads)  # cold: pipelines, plans
        check(out, x, idx, mask, chunk_rows, "lazyfuel")
        if tensors:
            torch_best_run(tensors, idx_pinned, chunk_rows)
        for _ in range(rounds):
            with Timeline() as timeline:
                begin = time.perf_counter()
                y.compute(out=out, scheduler="threads", num_workers=threads)
                end = time.perf_counter()
            rows.append(timeline.summary(begin, end))
            if tensors:
                start = time.perf_counter()
                torch_best_run(tensors, idx_pinned, chunk_rows)
                ratios.append((time.perf_counter() - start) / (end - begin))
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    gbs = [x.nbytes / r["wall"] / 1e9 for r in rows]
    ratio = f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})" if ratios else "-"
    print(f"| {mib} | {threads} | {task_mib} | {per_thread} | {gate} | {prep} | "
          f"{statistics.median(gbs):.1f} ({max(gbs):.1f}) | {ratio} | "
          f"{med['programs']:.0f} | {med['lead']:.1f} | {med['tail']:.1f} | {med['busy']:.2f} | "
          f"{med['depth']:.1f} | {med['prog']:.2f} | {med['host']:.2f} | {med['slots']:.0f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=4.0)
    parser.add_argument("--mibs", default="8,64")
    parser.add_argument("--threads", default=str(os.cpu_count() or 1))
    parser.add_argument("--task-mibs", default="64")
    parser.add_argument("--per-thread", default="2")
    parser.add_argument("--gates", default="0")
    parser.add_argument("--prep-gates", default="1", help="`prep_slots` values (0: off)")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--warm-s", type=float, default=1.5)
    args = parser.parse_args()
    register()
    pool = get_pool()
    host, mask = make_inputs(args.gib)
    x = lf.empty_pinned(host.shape, host.dtype)
    np.copyto(x, host)
    del host
    out = lf.empty_pinned(x.shape, x.dtype)
    out[...] = 0
    tensors = torch_best_tensors(x, mask)
    print(f"{pool.label}: {x.nbytes / 2**30:.2f} GiB page-locked x and out, {len(pool.queues)} queues, "
          f"{os.cpu_count()} CPUs; {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
    print("\n| chunk MiB | threads | task MiB | tasks a thread | gate | prep gate | GB/s median (best) | "
          "torch best / lazyfuel wall | programs | lead ms | tail ms | busy | depth | prog ms | host ms | "
          "queue slots |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    axes = (args.mibs, args.threads, args.task_mibs, args.per_thread, args.gates, args.prep_gates)
    grid = [[int(v) for v in text.split(",")] for text in axes]
    for mib, threads, task_mib, per_thread, gate, prep in itertools.product(*grid):
        warm(args.warm_s, x)
        variant(x, out, mask, mib, threads, task_mib, per_thread, gate, prep, args.rounds, tensors)
    print(f"\nvalidation messages: {len(pool.validation_messages)}")


if __name__ == "__main__":
    main()
