"""Timing the bench workloads: warm each implementation once, then keep the best of `repeats`.

The best (not the mean) is reported because the question is what each implementation can do;
noise on a shared machine only ever adds time. Every implementation's result is compared with
numpy's, so a fast wrong answer cannot win.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from lazyfuel.bench.workloads import IMPLEMENTATIONS, WORKLOADS

QUICK_SIZES = (4 * 2**20, 32 * 2**20)
FULL_SIZES = (4 * 2**20, 32 * 2**20, 128 * 2**20, 512 * 2**20)


@dataclass(frozen=True)
class Timing:
    """One implementation of one op at one size."""

    op: str
    size: int
    impl: str
    seconds: float
    bytes_moved: int

    @property
    def gbps(self) -> float:
        return self.bytes_moved / self.seconds / 1e9


def measure(ops: Sequence[str] | None = None, sizes: Sequence[int] = QUICK_SIZES, repeats: int = 2,
            seed: int = 0, progress: Callable[[str], None] | None = None) -> list[Timing]:
    """Time every implementation of each op at each size; ValueError for an unknown op name."""
    ops = list(ops or WORKLOADS)
    unknown = [o for o in ops if o not in WORKLOADS]
    if unknown:
        raise ValueError(f"unknown bench op {unknown[0]!r}; expected one of {', '.join(WORKLOADS)}")
    timings = []
    for op in ops:
        for size in sizes:
            work = WORKLOADS[op](size, np.random.default_rng(seed))
            reference = None
            for impl in IMPLEMENTATIONS:
                result = work.runs[impl]()  # warm-up: pools, pipelines, caches
                if reference is None:
                    reference = result
                elif not np.array_equal(result, reference):
                    raise RuntimeError(f"bench {op} at {size} bytes: {impl} disagrees with numpy")
                best = min(_time(work.runs[impl]) for _ in range(repeats))
                timings.append(Timing(op, size, impl, best, work.bytes_moved))
                if progress is not None:
                    progress(f"{op:<22} {size / 2**20:>6.0f} MiB  {impl:<9} {best * 1e3:9.2f} ms  "
                             f"{work.bytes_moved / best / 1e9:7.2f} GB/s")
    return timings


def _time(run: Callable[[], np.ndarray]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def table(timings: Sequence[Timing]) -> str:
    """Rows of op, size, implementation, time, GB/s and speed relative to numpy."""
    numpy_time = {(t.op, t.size): t.seconds for t in timings if t.impl == "numpy"}
    rows = [("op", "size", "impl", "time", "GB/s", "vs numpy")]
    for t in timings:
        ref = numpy_time.get((t.op, t.size))
        rows.append((t.op, f"{t.size / 2**20:.0f} MiB", t.impl, f"{t.seconds * 1e3:.2f} ms", f"{t.gbps:.2f}",
                     f"{ref / t.seconds:.2f}x" if ref else "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)
