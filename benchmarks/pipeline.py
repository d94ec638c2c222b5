"""index_select, gather and masked_fill on an in-memory array: lazyfuel, dask.array and numpy.

The workload of the lazy-array issue: an (N, N) float32 array in (ROWS, N) chunks; index_select of
N random rows, gather along axis 0 by a random (N, N) index array, masked_fill by a random mask.
Each timed run starts from the numpy inputs, builds the lazy expression and computes it to numpy
(`compute()`), so graph building, planning, scheduling and the final assembly of the blocks are
all inside. Variants run interleaved (one of each per round) after a warm-up, and the median
and the best of the rounds are reported.

- numpy: `np.take`, `np.take_along_axis`, `np.where` (one thread).
- dask: `da.from_array(a, chunks)[idx]`; `da.where`; for gather, which dask lacks along a chunked
  axis (dask#3663), rechunk to whole columns and `map_blocks(np.take_along_axis)`. A second line
  uses `from_array(name=False)`, which skips hashing the array's bytes (dask still copies it).
- lazyfuel with LAZYFUEL_BACKEND=auto, cpu and vulkan.

lazyfuel's own overhead is the run time not spent inside `Executor.run` (the kernels and, on
Vulkan, their transfers): measured by wrapping the executors the task bodies call, once with dask's
sync scheduler (total minus the summed run time) and once threaded (wall time during which no
thread is inside a run). `compute()` has each task's kernels write its block straight into the
one result array (`Executor.run(out=)`), so the result is made inside the runs; only blocks that
cannot be written in place are copied, and that copy counts as overhead. The device time that
`lf.profile()` collects (Vulkan) is shown beside.

    python benchmarks/pipeline.py                    # N=8192, 2 threads, 5 rounds
    python benchmarks/pipeline.py --n 1024 --rounds 2 --backends cpu   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import dask
import dask.array as da
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import lazyfuel as lf
from lazyfuel.graph import task as task_module
from lazyfuel.providers import available_backends

Run = Callable[[], np.ndarray]


class ExecutorClock:
    """Wraps the executors task bodies call, recording every `run` interval (all threads)."""

    def __init__(self) -> None:
        self.intervals: list[tuple[float, float]] = []
        self.backends: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._original = task_module.executor

    def __enter__(self) -> ExecutorClock:
        clock = self

        class Timed:
            def __init__(self, inner: Any) -> None:
                self.inner, self.backend = inner, inner.backend

            def run(self, program: Any, inputs: Any, out: Any = None) -> Any:
                start = time.perf_counter()
                try:
                    return self.inner.run(program, inputs, out=out)
                finally:
                    end = time.perf_counter()
                    with clock._lock:
                        clock.intervals.append((start, end))
                        clock.backends[program.backend.name] += 1

        task_module.executor = lambda *where: Timed(self._original(*where))
        return self

    def __exit__(self, *exc: object) -> None:
        task_module.executor = self._original

    def summed(self) -> float:
        return sum(b - a for a, b in self.intervals)

    def covered(self) -> float:
        """Seconds during which at least one thread was inside `run`."""
        total, end = 0.0, -1.0
        for a, b in sorted(self.intervals):
            if b > end:
                total += b - max(a, end)
                end = b
        return total


def workloads(n: int, rows: int, seed: int) -> dict[str, dict[str, Any]]:
    """The inputs of each op and its numpy reference."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n), dtype=np.float32)
    idx = rng.integers(0, n, n)
    gidx = rng.integers(0, n, (n, n))
    mask = rng.random((n, n)) < 0.5
    return {
        "index_select": {"a": a, "idx": idx, "rows": rows,
                         "numpy": lambda: np.take(a, idx, axis=0)},
        "gather": {"a": a, "idx": gidx, "rows": rows,
                   "numpy": lambda: np.take_along_axis(a, gidx, axis=0)},
        "masked_fill": {"a": a, "mask": mask, "rows": rows,
                        "numpy": lambda: np.where(mask, np.float32(-1.0), a)},
    }


def dask_run(op: str, w: dict[str, Any], threads: int, name: Any = None) -> Run:
    a, rows = w["a"], w["rows"]
    kw = {"num_workers": threads}

    def chunks(x: np.ndarray, c: Any) -> da.Array:
        return da.from_array(x, chunks=c) if name is None else da.from_array(x, chunks=c, name=name)

    if op == "index_select":
        return lambda: chunks(a, (rows, a.shape[1]))[w["idx"]].compute(**kw)
    if op == "masked_fill":
        return lambda: da.where(chunks(w["mask"], (rows, a.shape[1])), np.float32(-1.0),
                                chunks(a, (rows, a.shape[1]))).compute(**kw)

    def gather() -> np.ndarray:
        x = chunks(a, (rows, a.shape[1])).rechunk((a.shape[0], rows))  # whole columns
        i = chunks(w["idx"], (a.shape[0], rows))
        return da.map_blocks(lambda xb, ib: np.take_along_axis(xb, ib, axis=0), x, i,
                             dtype=a.dtype, meta=np.empty((0, 0), a.dtype)).compute(**kw)
    return gather


def lazyfuel_run(op: str, w: dict[str, Any], backend: str, threads: int, **kw: Any) -> Run:
    a, rows = w["a"], w["rows"]

    def run() -> np.ndarray:
        x = lf.from_array(a, chunks=(rows, a.shape[1]))
        if op == "index_select":
            y = lf.index_select(x, 0, w["idx"])
        elif op == "gather":
            y = lf.gather(x, 0, w["idx"])
        else:
            y = lf.masked_fill(x, w["mask"], -1.0)
        return y.compute(backend=backend, **(kw or {"num_workers": threads}))
    return run


def timed(run: Run) -> float:
    start = time.perf_counter()
    out = run()
    seconds = time.perf_counter() - start
    del out
    return seconds


def overhead(run: Run, repeats: int) -> dict[str, float]:
    """Median total, kernel and overhead seconds (threaded: wall minus time covered by runs)."""
    totals, kernels = [], []
    backends: Counter[str] = Counter()
    device = []
    for _ in range(repeats):
        with ExecutorClock() as clock, lf.profile() as profile:
            totals.append(timed(run))
        kernels.append(clock.covered())
        backends.update(clock.backends)
        device.append(profile.device_seconds)
    i = int(np.argsort(totals)[len(totals) // 2])
    return {"total": totals[i], "kernel": kernels[i], "overhead": totals[i] - kernels[i],
            "programs": dict(backends), "device_s": device[i]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--rows", type=int, default=1024, help="chunk rows (default 1024)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ops", default="index_select,gather,masked_fill")
    parser.add_argument("--backends", default="auto,cpu,vulkan")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    dask.config.set(scheduler="threads", num_workers=args.threads)
    backends = []
    for b in args.backends.split(","):
        try:
            available_backends(b)
            backends.append(b)
        except RuntimeError as err:
            print(f"skipping lazyfuel {b}: {err}")
    data = workloads(args.n, args.rows, seed=0)
    print(f"# {args.n}x{args.n} float32 in ({args.rows}, {args.n}) chunks, {args.threads} threads, "
          f"{args.rounds} rounds; load average {os.getloadavg()[0]:.1f}; device(s): "
          f"{', '.join(d.name for d in lf.devices()) or 'none'}")
    results: dict[str, Any] = {}
    for op in args.ops.split(","):
        w = data[op]
        variants: dict[str, Run] = {"numpy": w["numpy"], "dask": dask_run(op, w, args.threads),
                                    "dask (name=False)": dask_run(op, w, args.threads, name=False)}
        for b in backends:
            variants[f"lazyfuel {b}"] = lazyfuel_run(op, w, b, args.threads)
        want = w["numpy"]()
        for label, run in variants.items():  # warm-up, and check the result
            got = run()
            if label.startswith("lazyfuel") and not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
                raise SystemExit(f"{op}: {label} differs from numpy")
            del got
        del want
        times: dict[str, list[float]] = {label: [] for label in variants}
        for _ in range(args.rounds):
            for label, run in variants.items():
                times[label].append(timed(run))
        med = {label: statistics.median(t) for label, t in times.items()}
        print(f"\n## {op}\n\n| variant | median s | best s | vs numpy | vs dask |\n|---|---|---|---|---|")
        for label, t in times.items():
            print(f"| {label} | {med[label]:.3f} | {min(t):.3f} | {med[label] / med['numpy']:.2f}x | "
                  f"{med['dask'] / med[label]:.2f}x faster |")
        extra = {}
        for b in backends:
            threaded = overhead(lazyfuel_run(op, w, b, args.threads), args.rounds)
            sync = overhead(lazyfuel_run(op, w, b, args.threads, scheduler="sync"), args.rounds)
            extra[b] = {"threaded": threaded, "sync": sync}
            print(f"\nlazyfuel {b}: threaded {threaded['total']:.3f} s, {threaded['kernel']:.3f} s with a "
                  f"kernel running, overhead {threaded['overhead']:.3f} s "
                  f"({100 * threaded['overhead'] / threaded['total']:.0f}%); sync {sync['total']:.3f} s, "
                  f"kernels {sync['kernel']:.3f} s, overhead {sync['overhead']:.3f} s "
                  f"({100 * sync['overhead'] / sync['total']:.0f}%); programs ran on {threaded['programs']}; "
                  f"device time (lf.profile) {threaded['device_s']:.3f} s")
        results[op] = {"times": times, "overhead": extra}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
