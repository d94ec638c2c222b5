"""Building a validated graph with the public API, explaining it, and running it.

`build(graph)` turns inputs and steps into lazy `lazyfuel.Array`s (API errors such as a shape
that does not fit become a `GraphError` at the step's line; nothing runs). `explain(graph)`
returns `lf.explain` of each output. `execute(built, scheduler)` computes every output in one
dask computation (stores and in-memory results together, so shared work runs once) under
`lf.profile()`, with a progress bar on stderr, and measures wall time and memory growth. Warnings
and lazyfuel's notices raised while the bar is drawn are held and shown after it closes, so none
lands inside the bar's line.

Schedulers: "threads" (default), "processes", "sync", or the address of a dask.distributed
scheduler ("tcp://host:8786"); stores go to paths every worker must see.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import dask

import lazyfuel as lf
from lazyfuel.notices import LOGGER
from lazyfuel.pipeline import inputs as input_kinds
from lazyfuel.pipeline import outputs as output_kinds
from lazyfuel.pipeline.document import GraphError
from lazyfuel.pipeline.ops import OPS
from lazyfuel.pipeline.spec import OutputSpec, PipelineSpec

LOCAL_SCHEDULERS = ("threads", "processes", "sync")
Log = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class Built:
    """A graph's values as lazy Arrays, and its outputs paired with theirs."""

    graph: PipelineSpec
    values: dict[str, lf.Array]
    outputs: list[tuple[OutputSpec, lf.Array]]
    pending_stores: list[str] = field(default_factory=list)  # generated stores not written yet


@dataclass
class RunResult:
    """What a run did: output summaries, wall time, what `lf.profile` saw, memory growth."""

    summaries: list[output_kinds.Summary]
    wall_seconds: float
    profile: Any
    logical_bytes: int  # inputs read + outputs written, from shapes
    peak_growth: int | None  # bytes of RSS growth during the run; None where not measured
    scheduler: str

    @property
    def bytes_moved(self) -> int:
        """Bytes the device moved as `lf.profile` counted them, else the logical bytes."""
        p = self.profile
        counted = p.bytes_uploaded + p.bytes_downloaded
        return counted if counted else self.logical_bytes

    @property
    def bytes_counted(self) -> bool:
        return bool(self.profile.bytes_uploaded + self.profile.bytes_downloaded)


def build(graph: PipelineSpec, log: Log = _stderr, write_stores: bool = True) -> Built:
    """Every input and step as lazy Arrays; GraphError naming the line of a failing one.

    With `write_stores=False` a generated zarr store that does not exist yet is stood in for by
    its generator (same shape, dtype and chunks), so nothing is written.
    """
    values: dict[str, lf.Array] = {}
    pending = []
    for spec in graph.inputs:
        options = spec.options
        if spec.kind == "zarr" and not write_stores and not options.path.exists() and options.generate:
            values[spec.name] = lf.asarray(input_kinds.random_array(options.generate))
            pending.append(str(options.path))
            continue
        values[spec.name] = input_kinds.build(spec.name, spec.kind, options, spec.line, graph.path, log)
    for step in graph.steps:
        args = {k: values[v] if isinstance(v, str) else v for k, v in step.values.items()}
        try:
            values[step.name] = OPS[step.op].call(**args, **step.params)
        except (ValueError, TypeError, IndexError, NotImplementedError) as err:
            reason = _first_line(err)
            reason = reason if reason.startswith(step.op) else f"{step.op}: {reason}"
            raise GraphError(reason, graph.path, step.line, f"step {step.name!r}", step.name) from err
    outs = []
    for spec in graph.outputs:
        arr = values[spec.value]
        output_kinds.check(spec, arr, graph.path)
        outs.append((spec, arr))
    return Built(graph, values, outs, pending)


def explain(graph: PipelineSpec) -> str:
    """`lf.explain` of each output, headed by its name; builds but writes and runs nothing. A note
    of a plan's header (a left-out backend) is shown once, in the first plan that has it."""
    built = build(graph, write_stores=False)
    parts = [f"# {built.graph.name}: {graph.description}".rstrip(": ")]
    for path in built.pending_stores:
        parts.append(f"(the store {path} is not written yet; the plan reads its generator instead)")
    said: set[str] = set()  # notes of the plans' headers (a left-out backend) already shown
    for spec, arr in built.outputs:
        parts.append(f"\n## output {spec.value!r} ({spec.kind}{f' -> {spec.path}' if spec.path else ''})")
        first, *header, body = _header_and_body(lf.explain(arr).rstrip())
        parts.append(first)
        parts += [line for line in header if line not in said]
        said.update(header)
        parts.append(body)
    return "\n".join(p for p in parts if p) + "\n"


def _header_and_body(plan: str) -> list[str]:
    """An `lf.explain` text as its first line, its header's notes (up to the first blank line),
    and the rest."""
    head, _, body = plan.partition("\n\n")
    first, *notes = head.splitlines()
    return [first, *notes, "\n" + body if body else ""]


def execute(built: Built, scheduler: str = "threads", progress: bool = True, log: Log = _stderr
            ) -> RunResult:
    """Compute every output; RunResult. GraphError if the run exceeds the graph's memory limit."""
    graph = built.graph
    local = scheduler in LOCAL_SCHEDULERS
    with lf.profile() as prof, _MemoryWatch(enabled=scheduler in ("threads", "sync")) as memory:
        started = time.perf_counter()
        try:  # a failed run leaves no temporary output of this process behind
            targets = [output_kinds.target(spec, arr, graph.path) for spec, arr in built.outputs]
            results = _compute(targets, scheduler, progress) if local else _compute_distributed(
                targets, scheduler, progress)
        except BaseException as err:
            output_kinds.discard([spec for spec, _ in built.outputs])
            if isinstance(err, IndexError):  # an index checked as its chunk was computed: say whose
                raise _located(built, err) from err
            raise
        wall = time.perf_counter() - started
    summaries = [output_kinds.summarise(spec, arr, res) for (spec, arr), res in zip(built.outputs, results)]
    used_inputs = {v for s in graph.steps for v in s.values.values() if isinstance(v, str)}
    used_inputs |= {o.value for o in graph.outputs}
    logical = sum(built.values[i.name].nbytes for i in graph.inputs if i.name in used_inputs)
    logical += sum(arr.nbytes for _, arr in built.outputs)
    result = RunResult(summaries, wall, prof, logical, memory.growth, scheduler)
    if graph.memory_limit is not None:
        if memory.growth is None:
            log(f"note: limits.memory is checked with the threads or sync scheduler only, not {scheduler}")
        elif memory.growth > graph.memory_limit:
            raise GraphError(f"memory grew by {memory.growth / 2**20:.1f} MiB during the run, over the "
                             f"graph's limit of {graph.memory_limit / 2**20:.1f} MiB", graph.path,
                             graph.memory_limit_line, "limits")
    return result


def _compute(targets: list[Any], scheduler: str, progress: bool) -> list[Any]:
    if not progress:
        return list(dask.compute(*targets, scheduler=scheduler))
    from dask.diagnostics import ProgressBar

    with held_notices(), ProgressBar(out=sys.stderr, minimum=lf.config._progress_after_s):
        return list(dask.compute(*targets, scheduler=scheduler))


class _Held(logging.Handler):
    """Keeps the records it is given, to be handled later."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def held_notices() -> Iterator[None]:
    """Hold the warnings and the `lazyfuel` logger's records raised in the block (by any thread),
    then show them, in order, as they would have been shown: after a progress bar has closed."""
    held = _Held()
    handlers, propagate = LOGGER.handlers[:], LOGGER.propagate
    LOGGER.handlers[:] = [held]
    LOGGER.propagate = False
    try:
        with warnings.catch_warnings(record=True) as caught:
            yield
    finally:
        LOGGER.handlers[:] = handlers
        LOGGER.propagate = propagate
        for w in caught:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno, w.file, w.line)
        for record in held.records:
            LOGGER.handle(record)


def _compute_distributed(targets: list[Any], address: str, progress: bool) -> list[Any]:
    try:
        from distributed import Client
        from distributed import progress as show_progress
    except ImportError:
        raise RuntimeError("--scheduler ADDRESS needs dask.distributed: pip install 'lazyfuel[distributed]'"
                           ) from None
    with Client(address, timeout="10s") as client:
        futures = client.compute(targets)
        if progress:
            with held_notices(), contextlib.redirect_stdout(sys.stderr):
                show_progress(futures)
                print(file=sys.stderr)
        return client.gather(futures)


class GraphIndexError(GraphError, IndexError):
    """An out-of-range index met while running a graph, located: the file, the step's line, the step
    and the value its `indices` came from (a GraphError and an IndexError both)."""


def _located(built: Built, err: IndexError) -> IndexError:
    """`err` as a GraphIndexError naming the step and indices it came from: the first step taking
    named indices with one outside its axis (they are read again to find out, on this failing path
    only). `err` itself when no step's indices are out of range (an IndexError of another kind)."""
    graph = built.graph
    takers = [s for s in graph.steps if isinstance(s.values.get("indices"), str)
              and isinstance(s.values.get("x"), str)]
    culprit = next((s for s in takers if _out_of_range(built, s)), None)
    if culprit is None:
        return err
    return GraphIndexError(_first_line(err), graph.path, culprit.line,
                           f"step {culprit.name!r}, indices {culprit.values['indices']!r}", culprit.name)


def _out_of_range(built: Built, step: Any) -> bool:
    """Whether an index of `step`'s indices lies outside the axis `dim` of its `x`."""
    x, indices = built.values[step.values["x"]], built.values[step.values["indices"]]
    size = x.shape[step.params.get("dim", 0) % max(x.ndim, 1)] if x.ndim else 1
    flat = indices.to_dask().ravel()
    if flat.size == 0:
        return False
    low, high = dask.compute(flat.min(), flat.max(), scheduler="threads")
    return bool(low < 0 or high >= size)


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    if isinstance(err, KeyError) and len(err.args) == 1:
        text = str(err.args[0])
    return text.splitlines()[0] if text else type(err).__name__


class _MemoryWatch:
    """Samples this process's resident memory every 5 ms while active; `.growth` is peak − start."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and os.path.exists("/proc/self/statm")
        self.growth: int | None = None
        self._stop = threading.Event()
        self._peak = 0
        self._start = 0
        self._thread: threading.Thread | None = None

    @staticmethod
    def _rss() -> int:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self._peak = max(self._peak, self._rss())

    def __enter__(self) -> _MemoryWatch:
        if self.enabled:
            self._start = self._peak = self._rss()
            self._thread = threading.Thread(target=self._sample, name="lazyfuel-memory", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._peak = max(self._peak, self._rss())
            self.growth = self._peak - self._start
