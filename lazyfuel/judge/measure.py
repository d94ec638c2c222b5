"""Measuring bindings: a ladder of sizes, warm-up, repeats, medians, spread, and the fitted line.

`Judge(runner, device_fingerprint, cache)` times real one-step Programs through the runner it is
given (a backend's executor: the judge sits below the backends and never imports them; the caller
injects the executor and the device fingerprint the backend reports). For each binding it runs the
ladder of `ladder_workloads` sizes, each with warm-up runs and then repeats until a time budget is
spent, keeps the median and the interquartile spread (of the slowest view, where a rung times
several: Contiguize), and fits `latency + bytes / bandwidth` by
least squares on relative error (every rung counts alike, from microseconds to seconds). A
program of several steps of the same binding at the smallest rung gives the per-dispatch cost.
Results are stored in the cache as each binding finishes; a binding whose key (revision, device,
judge version …) is already cached is not measured again unless `force` is given.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

import numpy as np

from lazyfuel.contracts.model import Backend
from lazyfuel.judge.cache import JudgeCache
from lazyfuel.judge.model import Judgement, Point, dtype_key, judgement_key
from lazyfuel.judge.progress import Progress
from lazyfuel.judge.workloads import Workload, ladder_workload, ladder_workloads, supported
from lazyfuel.planner.program import Program
from lazyfuel.registry.model import Binding

CHAIN_STEPS = 4  # steps of the program that measures the per-dispatch cost


class Runner(Protocol):
    """What the judge needs of an executor: its backend and `run(program, inputs)`."""

    backend: Backend

    def run(self, program: Program, inputs: Sequence[np.ndarray]) -> list[np.ndarray]: ...


@dataclass(frozen=True)
class Budget:
    """How hard to measure: ladder sizes (output elements), warm-up runs, repeats and time limits."""

    sizes: tuple[int, ...]
    warmup: int
    min_repeats: int
    max_repeats: int
    min_seconds: float  # keep repeating until this much time was spent (and min_repeats done)
    max_seconds: float  # stop repeating a rung after this long (once 2 repeats are done)


QUICK = Budget(sizes=(1 << 8, 1 << 12, 1 << 16, 1 << 19), warmup=1, min_repeats=3, max_repeats=7,
               min_seconds=0.01, max_seconds=0.15)
FULL = Budget(sizes=tuple(1 << k for k in range(8, 23, 2)), warmup=2, min_repeats=5, max_repeats=25,
              min_seconds=0.05, max_seconds=1.0)


def time_runs(run: Callable[[], object], budget: Budget) -> tuple[float, float, int]:
    """Median seconds, relative interquartile spread and repeat count of `run()` after warm-up."""
    for _ in range(budget.warmup):
        run()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < budget.max_repeats:
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
        spent = time.perf_counter() - start
        if len(times) >= budget.min_repeats and spent >= budget.min_seconds:
            break
        if len(times) >= 2 and spent >= budget.max_seconds:
            break
    median = float(np.median(times))
    q1, q3 = np.percentile(times, [25, 75])
    return median, float(q3 - q1) / median if median > 0 else 0.0, len(times)


def fit_line(points: Sequence[Point]) -> tuple[float, float]:
    """(latency, seconds per byte) minimising the squared relative error, both >= 0."""
    x = np.array([p.bytes_moved for p in points], dtype=np.float64)
    t = np.array([p.seconds for p in points], dtype=np.float64)
    w = 1.0 / np.maximum(t, 1e-12) ** 2
    if len(points) >= 2 and np.ptp(x) > 0:
        a = np.array([[w.sum(), (w * x).sum()], [(w * x).sum(), (w * x * x).sum()]])
        rhs = np.array([(w * t).sum(), (w * x * t).sum()])
        latency, per_byte = np.linalg.solve(a, rhs)
        if latency >= 0 and per_byte >= 0:
            return float(latency), float(per_byte)
        if latency < 0:  # the line through the origin
            return 0.0, float((w * x * t).sum() / max((w * x * x).sum(), 1e-300))
    return float((w * t).sum() / w.sum()), 0.0  # no per-byte cost visible: a constant


def run_workload(runner: Runner, workload: Workload) -> Callable[[], object]:
    """A callable running the workload's program once through `runner`."""
    program, inputs = workload.program, list(workload.inputs)
    return lambda: runner.run(program, inputs)


@dataclass(frozen=True)
class Verdict:
    """One binding's judgement and whether it was measured now (False: read from the cache).

    `judgement` is None (and `error` says why) when running the binding failed; nothing is cached.
    """

    binding: Binding
    judgement: Judgement | None
    measured: bool
    error: str = ""


class Judge:
    """Measures bindings of one backend on one device and caches the results (module docstring)."""

    def __init__(self, runner: Runner, device_fingerprint: str, cache: JudgeCache | None = None, *,
                 quick: bool = False, budget: Budget | None = None, seed: int = 0) -> None:
        self.runner = runner
        self.device_fingerprint = device_fingerprint
        self.cache = cache if cache is not None else JudgeCache()
        self.quick = quick
        self.budget = budget or (QUICK if quick else FULL)
        self.seed = seed

    def judge(self, bindings: Sequence[Binding], *, force: bool = False,
              progress: Progress | None = None) -> list[Verdict]:
        """A verdict for every binding of this judge's backend whose op kind has a workload.

        Cached judgements are returned as they are unless `force`, or unless they were measured
        quickly and this judge is not quick; the others are measured now and stored in the cache
        one by one (an interrupted run keeps what it measured). A binding whose program fails gets
        a verdict with the error, and the others are still measured.
        """
        mine = [b for b in bindings if b.backend is self.runner.backend and supported(b)]
        cached = {} if force else self.cache.load()
        verdicts = []
        todo = []
        for b in mine:
            hit = cached.get(judgement_key(b, self.device_fingerprint))
            if hit is not None and (self.quick or not hit.quick):
                verdicts.append(Verdict(b, hit, False))
            else:
                todo.append(b)
        if progress is not None:
            progress.start(len(todo), f"judging {len(todo)} {self.runner.backend} binding(s)")
        for b in todo:
            if progress is not None:
                progress.label(f"{b.op_kind.name} {dtype_key(b)} {b.backend.name}")
            try:
                judgement = self.measure(b)
            except Exception as err:  # a broken kernel must not stop the others being judged
                verdicts.append(Verdict(b, None, True, f"{type(err).__name__}: {err}"))
            else:
                self.cache.put([judgement])
                verdicts.append(Verdict(b, judgement, True))
            if progress is not None:
                progress.advance()
        if progress is not None:
            progress.finish()
        order = {b.key: i for i, b in enumerate(mine)}
        return sorted(verdicts, key=lambda v: order[v.binding.key])

    def measure(self, binding: Binding) -> Judgement:
        """Time `binding` over the ladder and fit its cost (not cached: `judge` does that)."""
        rng = np.random.default_rng(self.seed)
        points = []
        for n in self.budget.sizes:
            timed = [(time_runs(run_workload(self.runner, w), self.budget), w)
                     for w in ladder_workloads(binding, n, rng)]
            (seconds, spread, repeats), workload = max(timed, key=lambda t: t[0][0])  # the slowest view
            points.append(Point(workload.n, workload.bytes_moved, seconds, spread, repeats))
        latency, per_byte = fit_line(points)
        dispatch = self._dispatch_cost(binding, rng, points[0], per_byte)
        spread = float(np.median([p.spread for p in points]))
        return Judgement(
            key=judgement_key(binding, self.device_fingerprint),
            device_fingerprint=self.device_fingerprint, kernel_source=binding.kernel_source,
            symbol=binding.symbol, dtypes=dtype_key(binding), revision_hash=binding.revision_hash,
            latency_s=latency, seconds_per_byte=per_byte, dispatch_s=min(dispatch, latency),
            spread=spread, points=tuple(points), quick=self.quick,
            measured_at=datetime.now(UTC).isoformat(timespec="seconds"))

    def _dispatch_cost(self, binding: Binding, rng: np.random.Generator, first: Point,
                       per_byte: float) -> float:
        """What each further step of the binding adds to a program, at the smallest rung."""
        workload = ladder_workload(binding, first.n, rng, steps=CHAIN_STEPS)
        seconds, _, _ = time_runs(run_workload(self.runner, workload), self.budget)
        extra = (seconds - first.seconds) / (CHAIN_STEPS - 1) - first.bytes_moved * per_byte
        return max(extra, 0.0)
