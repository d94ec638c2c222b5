"""The judge's launch-shape tuning wired to the Vulkan pool (`judge.tuning`, decision 40).

- `tune_vulkan(cache, quick=..., force=...)`: times, per family of `TUNED_FAMILIES`, the device
  kind's default workgroup size x elements per invocation and a few neighbours on one F32 binding
  of the family (at one rung quick, two otherwise, on the kernel clock), stores each pick in the
  judge cache and applies the picks to this process's pool. What `lazyfuel judge` runs.
Pools read the cached picks through `lazyfuel.measured.vulkan_picks` (the environment's overrides
still win, tuning.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from lazyfuel.backends.base import executor
from lazyfuel.backends.vulkan.fingerprint import vulkan_fingerprint
from lazyfuel.backends.vulkan.tuning import TUNED_FAMILIES, choose_tuning, default_tuning
from lazyfuel.contracts.model import Backend
from lazyfuel.dtypes import DType
from lazyfuel.judge import Judge, JudgeCache, TuningPick, TuningTarget, neighbours
from lazyfuel.judge.measure import run_workload
from lazyfuel.judge.tuning import Shape
from lazyfuel.judge.workloads import ladder_workloads, supported
from lazyfuel.measured import vulkan_revisions
from lazyfuel.providers import default_registry
from lazyfuel.registry import Registry
from lazyfuel.registry.model import Binding

QUICK_RUNGS = (1 << 20,)  # output elements of the workloads a candidate is timed on
FULL_RUNGS = (1 << 20, 1 << 22)


def family_binding(registry: Registry, family: str) -> Binding:
    """An F32 Vulkan binding the judge has workloads for whose kernel is the shader `family`."""
    for b in registry.bindings():
        if (b.backend is Backend.Vulkan and getattr(b.kernel_ref.impl, "family", None) == family
                and b.dtypes[0] is DType.F32 and supported(b)):
            return b
    raise LookupError(f"no F32 Vulkan binding with a judge workload runs the {family} shader")


def _rung(runner: Any, family: str, run: Callable[[], float | None]) -> Callable[[Shape], float | None]:
    """Run a workload once with `family`'s shape set to the one given (restored after)."""
    def with_shape(shape: Shape) -> float | None:
        groups = runner.pool.groups
        saved = groups[family]
        groups[family] = shape
        try:
            return run()
        finally:
            groups[family] = saved
    return with_shape


def vulkan_targets(runner: Any, registry: Registry, rungs: tuple[int, ...],
                   seed: int = 0) -> list[TuningTarget]:
    """One `TuningTarget` per tuned family on `runner`'s pool (the slowest view where the ladder
    has two: contiguize's transposed one)."""
    pool = runner.pool
    defaults = default_tuning(pool.info.kind).groups
    revisions = vulkan_revisions()
    rng = np.random.default_rng(seed)
    targets = []
    for family in TUNED_FAMILIES:
        binding = family_binding(registry, family)
        runs = tuple(_rung(runner, family, run_workload(runner, ladder_workloads(binding, n, rng)[-1]))
                     for n in rungs)
        default = defaults[family]
        targets.append(TuningTarget(family, revisions[family], default,
                                    tuple(neighbours(default, pool.info.max_workgroup_size)), runs))
    return targets


def tune_vulkan(cache: JudgeCache | None = None, *, quick: bool = False, force: bool = False,
                registry: Registry | None = None) -> list[tuple[TuningPick, bool]]:
    """Tune the Vulkan kernels' shapes on this process's default device (module docstring); each
    pick with whether it was measured now (False: cached). This process's pool runs them after."""
    registry = registry if registry is not None else default_registry()  # registers the executors
    runner = executor(Backend.Vulkan)
    judge = Judge(runner, vulkan_fingerprint(runner.pool.info), cache, quick=quick)
    targets = vulkan_targets(runner, registry, QUICK_RUNGS if quick else FULL_RUNGS)
    found = judge.tune(targets, force=force)
    pool = runner.pool
    picks = {p.family: p.chosen for p, _ in found if p.changed}
    pool.groups.update(choose_tuning(pool.info.kind, pool.info.max_workgroup_size, picks=picks).groups)
    return found
