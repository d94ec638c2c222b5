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

What is timed: a runner that can clock its kernels on the device (`KernelTimer`: Vulkan's GPU
timestamps) gives the device-side time of the program's steps alone, so bindings of one device
are compared on what they cost inside a fused chain, whose intermediates never leave it; other
runners (Cpu, the FFT providers) are timed by wall clock. A runner that is a `TransferProbe`
also gets its transfers measured once per device and mode (`judge_transfer`): an empty batch
(submit and wait), then uploads and downloads over `Budget.transfer_bytes`, each direction fitted
as a line; the planner adds that term to a program's kernels (`judge.transfers`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np

from lazyfuel.contracts.model import Backend
from lazyfuel.judge.cache import JudgeCache
from lazyfuel.judge.model import Judgement, Point, dtype_key, judgement_key
from lazyfuel.judge.progress import Progress
from lazyfuel.judge.shape_picks import (
    CandidateTiming,
    Shape,
    TuningPick,
    TuningTarget,
    tune_family,
    tuning_key,
)
from lazyfuel.judge.transfers import TransferJudgement, TransferProbe, transfer_key
from lazyfuel.judge.workloads import Workload, ladder_workload, ladder_workloads, supported
from lazyfuel.planner.program import Program
from lazyfuel.registry.model import Binding

CHAIN_STEPS = 4  # steps of the program that measures the per-dispatch cost


class Runner(Protocol):
    """What the judge needs of an executor: its backend and `run(program, inputs)`."""

    backend: Backend

    def run(self, program: Program, inputs: Sequence[np.ndarray]) -> list[np.ndarray]: ...


@runtime_checkable
class KernelTimer(Protocol):
    """A runner that clocks a program's steps on the device (the judge then times with it)."""

    def time_kernels(self, program: Program, inputs: Sequence[np.ndarray]) -> float | None:
        """Run `program`; the device seconds of its steps alone (None: no device clock here)."""
        ...


@dataclass(frozen=True)
class Budget:
    """How hard to measure: ladder sizes (output elements), warm-up runs, repeats and time limits."""

    sizes: tuple[int, ...]
    warmup: int
    min_repeats: int
    max_repeats: int
    min_seconds: float  # keep repeating until this much time was spent (and min_repeats done)
    max_seconds: float  # stop repeating a rung after this long (once 2 repeats are done)
    transfer_bytes: tuple[int, ...] = (1 << 12, 1 << 20)  # the transfer ladder (bytes per array)
    # more rungs where the runner clocks kernels: a GPU's kernels of the `sizes` above can all be
    # shorter than its launch latency, so its bandwidth only shows on a bigger one
    device_sizes: tuple[int, ...] = ()
    # rounds of the kernel-shape tuning, each running every candidate once (`Judge.time_interleaved`)
    tuning_rounds: int = 9


QUICK = Budget(sizes=(1 << 8, 1 << 12, 1 << 16, 1 << 19), warmup=1, min_repeats=3, max_repeats=7,
               min_seconds=0.01, max_seconds=0.15, transfer_bytes=(1 << 12, 1 << 16, 1 << 20, 1 << 24),
               device_sizes=(1 << 20,), tuning_rounds=21)
FULL = Budget(sizes=tuple(1 << k for k in range(8, 23, 2)), warmup=2, min_repeats=5, max_repeats=25,
              min_seconds=0.05, max_seconds=1.0, transfer_bytes=tuple(1 << k for k in range(12, 27, 2)),
              tuning_rounds=41)


class Timing(NamedTuple):
    """What `time_runs` found: median seconds, relative interquartile spread, repeats, the clock."""

    seconds: float
    spread: float
    repeats: int
    clock: str  # "kernel": the seconds `run()` returned; "wall": the wall clock around it


def time_runs(run: Callable[[], float | None], budget: Budget) -> Timing:
    """Median, spread and repeat count of `run()` after warm-up: of the seconds it returns where it
    returns them (a device clock), else of the wall clock around it."""
    for _ in range(budget.warmup):
        run()
    times: list[float] = []
    clocked = True
    start = time.perf_counter()
    while len(times) < budget.max_repeats:
        t0 = time.perf_counter()
        returned = run()
        wall = time.perf_counter() - t0
        clocked = clocked and returned is not None
        times.append(returned if returned is not None else wall)
        spent = time.perf_counter() - start
        if len(times) >= budget.min_repeats and spent >= budget.min_seconds:
            break
        if len(times) >= 2 and spent >= budget.max_seconds:
            break
    median = float(np.median(times))
    q1, q3 = np.percentile(times, [25, 75])
    return Timing(median, float(q3 - q1) / median if median > 0 else 0.0, len(times),
                  "kernel" if clocked else "wall")


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


def _point(timing: Timing, workload: Workload) -> Point:
    return Point(workload.n, workload.bytes_moved, timing.seconds, timing.spread, timing.repeats)


def run_workload(runner: Runner, workload: Workload) -> Callable[[], float | None]:
    """A callable running the workload's program once through `runner`: it returns the device
    seconds of the steps where the runner clocks them (`KernelTimer`), else None."""
    program, inputs = workload.program, list(workload.inputs)
    if isinstance(runner, KernelTimer):
        return lambda: runner.time_kernels(program, inputs)

    def run() -> None:
        runner.run(program, inputs)
    return run


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
        if mine and isinstance(self.runner, TransferProbe):
            self.judge_transfer(force=force)
        order = {b.key: i for i, b in enumerate(mine)}
        return sorted(verdicts, key=lambda v: order[v.binding.key])

    def judge_transfer(self, *, force: bool = False) -> TransferJudgement:
        """The runner's transfer term on this device and mode: cached unless `force` (or quick
        while this judge is not), else measured now and stored. TypeError if the runner is not a
        `TransferProbe`."""
        probe = self.runner
        if not isinstance(probe, TransferProbe):
            raise TypeError(f"the {type(probe).__name__} of {probe.backend} cannot time transfers "
                            "(it has no transfer_mode / time_transfer)")
        key = transfer_key(probe.backend, self.device_fingerprint, probe.transfer_mode)
        hit = None if force else self.cache.load_transfers().get(key)
        if hit is not None and (self.quick or not hit.quick):
            return hit
        judgement = self.measure_transfer(probe)
        self.cache.put_transfer(judgement)
        return judgement

    def tune(self, targets: Sequence[TuningTarget], *, force: bool = False) -> list[tuple[TuningPick, bool]]:
        """A launch-shape pick per target (`judge.shape_picks`) and whether it was measured now: cached
        unless `force` (or quick while this judge is not), else timed now (`time_interleaved`)
        and stored."""
        backend = self.runner.backend.name
        cached = {} if force else self.cache.load_tuning()
        found = []
        for target in targets:
            hit = cached.get(tuning_key(backend, self.device_fingerprint, target.family,
                                        target.revision_hash))
            if hit is not None and (self.quick or not hit.quick) and hit.default == target.default:
                found.append((hit, False))
                continue
            pick = tune_family(backend, self.device_fingerprint, target, self.time_interleaved(target),
                               quick=self.quick)
            self.cache.put_tuning([pick])
            found.append((pick, True))
        return found

    def time_interleaved(self, target: TuningTarget) -> list[CandidateTiming]:
        """Each candidate's median and relative interquartile spread (the default first) over
        rounds that run every candidate once on every rung (their seconds summed): interleaved, so
        a load that comes and goes on the machine lands on all candidates alike. Warm-up rounds
        first, then `tuning_rounds` rounds (fewer, but at least `min_repeats`, once each candidate
        had 4 x `max_seconds`)."""
        shapes = list(dict.fromkeys((target.default, *target.candidates)))

        def once(shape: Shape) -> float:
            total = 0.0
            for rung in target.rungs:
                t0 = time.perf_counter()
                returned = rung(shape)
                total += returned if returned is not None else time.perf_counter() - t0
            return total

        for _ in range(self.budget.warmup):
            for shape in shapes:
                once(shape)
        samples: dict[Shape, list[float]] = {shape: [] for shape in shapes}
        start = time.perf_counter()
        for done in range(1, self.budget.tuning_rounds + 1):
            for shape in shapes:
                samples[shape].append(once(shape))
            spent = time.perf_counter() - start
            if done >= self.budget.min_repeats and spent >= 4 * self.budget.max_seconds * len(shapes):
                break
        found = []
        for shape, times in samples.items():
            median = float(np.median(times))
            q1, q3 = np.percentile(times, [25, 75])
            found.append(CandidateTiming(shape, median, float(q3 - q1) / median if median > 0 else 0.0))
        return found

    def measure_transfer(self, probe: TransferProbe) -> TransferJudgement:
        """Time an empty batch, then uploads and downloads over the transfer ladder, and fit each
        direction's line (not cached: `judge_transfer` does that)."""
        submit = time_runs(lambda: probe.time_transfer(None, None), self.budget)
        up, down = [], []
        for n in self.budget.transfer_bytes:
            data = np.full(n, 7, np.uint8)
            timing = time_runs(lambda d=data: probe.time_transfer(d, None), self.budget)
            up.append(Point(n, float(n), timing.seconds, timing.spread, timing.repeats))
            timing = time_runs(lambda k=n: probe.time_transfer(None, np.empty(k, np.uint8)), self.budget)
            down.append(Point(n, float(n), timing.seconds, timing.spread, timing.repeats))
        up_latency, up_per_byte = fit_line(up)
        down_latency, down_per_byte = fit_line(down)
        return TransferJudgement(
            key=transfer_key(probe.backend, self.device_fingerprint, probe.transfer_mode),
            device_fingerprint=self.device_fingerprint, backend=probe.backend.name,
            mode=probe.transfer_mode, submit_s=submit.seconds, up_latency_s=up_latency,
            up_seconds_per_byte=up_per_byte, down_latency_s=down_latency,
            down_seconds_per_byte=down_per_byte,
            spread=float(np.median([p.spread for p in (*up, *down)] + [submit.spread])),
            up_points=tuple(up), down_points=tuple(down), quick=self.quick,
            measured_at=datetime.now(UTC).isoformat(timespec="seconds"))

    def measure(self, binding: Binding) -> Judgement:
        """Time `binding` over the ladder and fit its cost (not cached: `judge` does that)."""
        rng = np.random.default_rng(self.seed)
        points, dense, clocks = [], [], set()
        extra = self.budget.device_sizes if isinstance(self.runner, KernelTimer) else ()
        for n in (*self.budget.sizes, *extra):
            timed = [(time_runs(run_workload(self.runner, w), self.budget), w)
                     for w in ladder_workloads(binding, n, rng)]
            timing, workload = max(timed, key=lambda t: t[0].seconds)  # the slowest view
            points.append(_point(timing, workload))
            if len(timed) > 1:
                dense.append(_point(*timed[0]))  # the first view is the dense one
            clocks.update(t.clock for t, _ in timed)
        latency, per_byte = fit_line(points)
        dispatch = self._dispatch_cost(binding, rng, points[0], per_byte)
        spread = float(np.median([p.spread for p in points]))
        return Judgement(
            key=judgement_key(binding, self.device_fingerprint),
            device_fingerprint=self.device_fingerprint, kernel_source=binding.kernel_source,
            symbol=binding.symbol, dtypes=dtype_key(binding), revision_hash=binding.revision_hash,
            latency_s=latency, seconds_per_byte=per_byte, dispatch_s=min(dispatch, latency),
            spread=spread, points=tuple(points), quick=self.quick,
            measured_at=datetime.now(UTC).isoformat(timespec="seconds"),
            clock="kernel" if clocks == {"kernel"} else "wall",
            dense_seconds_per_byte=fit_line(dense)[1] if dense else None)

    def _dispatch_cost(self, binding: Binding, rng: np.random.Generator, first: Point,
                       per_byte: float) -> float:
        """What each further step of the binding adds to a program, at the smallest rung."""
        workload = ladder_workload(binding, first.n, rng, steps=CHAIN_STEPS)
        seconds = time_runs(run_workload(self.runner, workload), self.budget).seconds
        extra = (seconds - first.seconds) / (CHAIN_STEPS - 1) - first.bytes_moved * per_byte
        return max(extra, 0.0)
