"""Cost-based choice of backend: `auto` (judged costs) vs "Vulkan only" vs "CPU only", side by side.

For each op on a (8192, 8192) f32 array (64M elements, 256 MiB) in (2048, 8192) chunks, the same
lazy pipeline is lowered to dask with four planners and computed (threaded scheduler):

- `auto`: Vulkan and Cpu allowed, costs measured by the judge (`lazyfuel.judged_costs.measured_costs`);
- `auto (priors)`: the same without measurements (the shared cost priors of `registry/cost.py`);
- `vulkan`: Vulkan only; `cpu`: Cpu only.

Ops: index_select (8192 random rows), gather (random column per element, dim 1), masked_fill
(half the elements), contiguous(x.T). Before timing, the judge measures the f32 bindings these
ops use (cached, so a second run measures nothing). Each configuration runs once to warm up, then
`--repeats` times, the configurations interleaved; the median (and the best) is reported with
the backend the plans used. "auto vs best" is the better single-backend median over auto's (and
the same for the best runs); above 1 means auto was faster.

    python benchmarks/probes/select_choice.py            # 64M f32, full judge ladder
    python benchmarks/probes/select_choice.py --quick    # 4M f32, quick judge
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import sys
import time
import warnings
from dataclasses import dataclass
from datetime import date

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))  # the repository root

import lazyfuel.api as lf
from lazyfuel.contracts.model import Backend
from lazyfuel.graph.lower import lower
from lazyfuel.judge import Progress
from lazyfuel.judge.costs import UnmeasuredCostWarning
from lazyfuel.judged_costs import device_fingerprint, judge_registry, measured_costs
from lazyfuel.planner import Planner
from lazyfuel.providers import default_registry

_PLANNERS: dict[str, Planner] = {}
_USED: dict[str, set[str]] = {}


class _Recording:
    """A planner that remembers the backend of every program it hands out."""

    def __init__(self, name: str, planner: Planner) -> None:
        self.name, self.inner = name, planner

    def plan(self, *args, **kwargs):
        program = self.inner.plan(*args, **kwargs)
        _USED.setdefault(self.name, set()).add(program.backend.name)
        return program


@dataclass(frozen=True)
class BenchRuntime:
    """A graph runtime whose planner is one of the benchmark's configurations (by name)."""

    name: str

    def planner(self) -> _Recording:
        return _Recording(self.name, _PLANNERS[self.name])

    def applied(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()


def _planners() -> None:
    registry = default_registry()
    both = [Backend.Vulkan, Backend.Cpu]
    _PLANNERS["auto"] = Planner(registry, both, costs=measured_costs(registry, both))
    _PLANNERS["auto (priors)"] = Planner(registry, both)
    vulkan, cpu = [Backend.Vulkan], [Backend.Cpu]
    _PLANNERS["vulkan"] = Planner(registry, vulkan, costs=measured_costs(registry, vulkan))
    _PLANNERS["cpu"] = Planner(registry, cpu, costs=measured_costs(registry, cpu))


def _ops(side: int, rows_per_chunk: int, rng: np.random.Generator) -> dict[str, lf.Array]:
    x_np = rng.standard_normal((side, side), dtype=np.float32)
    x = lf.from_array(x_np, chunks=(rows_per_chunk, side))
    rows = rng.integers(0, side, side).astype(np.uint32)
    cols = rng.integers(0, side, (side, side)).astype(np.uint32)
    mask = rng.random((side, side)) < 0.5
    return {
        "index_select": lf.index_select(x, 0, rows),
        "gather": lf.gather(x, 1, lf.from_array(cols, chunks=(rows_per_chunk, side))),
        "masked_fill": lf.masked_fill(x, lf.from_array(mask, chunks=(rows_per_chunk, side)), -1.0),
        "contiguous(x.T)": lf.contiguous(x.T),
    }


def _time(arr: lf.Array, configs: tuple[str, ...], repeats: int) -> dict[str, tuple[float, float, str]]:
    """Median and best seconds per configuration, and the backends its plans used.

    The configurations run interleaved (one run of each per round), so load from other processes
    on the machine falls on all of them alike.
    """
    graphs = {c: lower(arr._node, BenchRuntime(c)) for c in configs}
    for c, graph in graphs.items():
        _USED.pop(c, None)
        graph.compute(scheduler="threads")  # warm-up: pipelines, plans, page faults
    times: dict[str, list[float]] = {c: [] for c in configs}
    for _ in range(repeats):
        for c, graph in graphs.items():
            t0 = time.perf_counter()
            graph.compute(scheduler="threads")
            times[c].append(time.perf_counter() - t0)
    return {c: (statistics.median(t), min(t), "+".join(sorted(_USED.get(c, ()))) or "?")
            for c, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2048x2048 and the quick judge")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    side = 2048 if args.quick else 8192
    judge_registry(backends=[Backend.Vulkan, Backend.Cpu], quick=args.quick, progress=Progress(),
                   select=lambda b: b.dtypes[0].name == "F32")
    _planners()
    print(f"# select_choice: {side}x{side} f32 ({side * side / 2**20:.0f}M elements), chunks of "
          f"{side // 4} rows, median of {args.repeats}, {date.today()}")
    print(f"# vulkan device: {device_fingerprint(Backend.Vulkan)}")
    print(f"# host: {platform.node()} {os.cpu_count()} cpus; load average {os.getloadavg()[0]:.1f}; "
          f"python {platform.python_version()}")
    configs = ("auto", "vulkan", "cpu", "auto (priors)")
    print("| op | " + " | ".join(configs) + " | auto vs best |")
    print("|---" * (len(configs) + 2) + "|")
    ops = _ops(side, side // 4, np.random.default_rng(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnmeasuredCostWarning)
        for name, arr in ops.items():
            results = _time(arr, configs, args.repeats)
            best = min(results["vulkan"][0], results["cpu"][0])
            best_low = min(results["vulkan"][1], results["cpu"][1])
            cells = [f"{med * 1e3:.0f} ms (min {low * 1e3:.0f}; {used})"
                     for med, low, used in results.values()]
            print(f"| {name} | " + " | ".join(cells) + f" | {best / results['auto'][0]:.2f}x "
                  f"(min {best_low / results['auto'][1]:.2f}x) |", flush=True)


if __name__ == "__main__":
    main()
