"""The judge's launch-shape tuning wired to each backend that has tunable kernels (decision 40).

- `tune_kernels(cache, quick=..., force=..., backends=...)`: for every registered backend with a
  `BackendInfo.tuning` (Vulkan: its workgroup size x elements per invocation) among `backends`,
  times, per tuned family, the device's default shape and a few neighbours on one F32 binding of
  the family that the judge has workloads for (at one rung quick, two otherwise, on the kernel
  clock), stores each pick in the judge cache and applies the picks to this process's device.
  What `lazyfuel judge` runs.
Devices read the cached picks through `lazyfuel.judged_costs.install_picks` (the environment's
overrides still win, e.g. Vulkan's launch_shapes.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lazyfuel.backends import catalog
from lazyfuel.backends.base import executor
from lazyfuel.backends.catalog import BackendInfo, TunedFamily
from lazyfuel.contracts.model import Backend
from lazyfuel.judge import Judge, JudgeCache, TuningPick, TuningTarget, neighbours
from lazyfuel.judge.binding_timing import run_workload
from lazyfuel.judge.shape_picks import Shape
from lazyfuel.judge.workloads import ladder_workloads, supported
from lazyfuel.providers import default_registry
from lazyfuel.registry import Registry
from lazyfuel.registry.model import Binding

QUICK_RUNGS = (1 << 20,)  # output elements of the workloads a candidate is timed on
FULL_RUNGS = (1 << 20, 1 << 22)


def family_binding(registry: Registry, family: TunedFamily) -> Binding:
    """The binding of `family` the judge has workloads for, to time its shapes on."""
    for b in family.binding_of(registry.bindings()):
        if supported(b):
            return b
    raise LookupError(f"no F32 binding with a judge workload runs the {family.family} shader")


def _rung(family: TunedFamily, run: Callable[[], float | None]) -> Callable[[Shape], float | None]:
    """Run a workload once with `family`'s shape set to the one given (restored after)."""
    return lambda shape: family.with_shape(shape, run)


def targets(runner: Any, found: BackendInfo, registry: Registry, rungs: tuple[int, ...],
            seed: int = 0) -> list[TuningTarget]:
    """One `TuningTarget` per family `found` tunes on `runner`'s device (the slowest view where
    the ladder has two: contiguize's transposed one)."""
    rng = np.random.default_rng(seed)
    made = []
    for family in found.tuning.families(runner):
        binding = family_binding(registry, family)
        runs = tuple(_rung(family, run_workload(runner, ladder_workloads(binding, n, rng)[-1]))
                     for n in rungs)
        made.append(TuningTarget(family.family, family.revision, family.default,
                                 tuple(neighbours(family.default, family.max_workgroup_size)), runs))
    return made


def tunable(backends: Sequence[Backend] | None = None) -> list[BackendInfo]:
    """The registered backends among `backends` (default: every one) whose kernel shapes are tuned."""
    return [found for found in catalog.registered() if found.tuning is not None
            and (backends is None or found.backend in backends)]


def tune_kernels(cache: JudgeCache | None = None, *, quick: bool = False, force: bool = False,
                 registry: Registry | None = None, backends: Sequence[Backend] | None = None
                 ) -> list[tuple[TuningPick, bool]]:
    """Tune the kernel shapes of every tunable backend among `backends` on this process's default
    device (module docstring); each pick with whether it was measured now (False: cached). This
    process's devices run them after."""
    registry = registry if registry is not None else default_registry()  # registers the executors
    found_picks: list[tuple[TuningPick, bool]] = []
    for found in tunable(backends):
        runner = executor(found.backend)
        judge = Judge(runner, found.fingerprint(), cache, quick=quick)
        found_now = judge.tune(targets(runner, found, registry, QUICK_RUNGS if quick else FULL_RUNGS),
                               force=force)
        found.tuning.apply(runner, {p.family: p.chosen for p, _ in found_now if p.changed})
        found_picks += found_now
    return found_picks
