"""The judge wired to this process's backends: device fingerprints, judging, measured costs.

The judge layer cannot import backends, so this top-layer module injects what it needs: each
backend's executor and the fingerprint of the device it runs on (the `fingerprint` its package
registers, `backends.catalog`). `judge_registry()` measures the default registry (what
`lazyfuel judge` runs) and `measured_costs()` loads the cached measurements (and each device's
transfer term, for the backends whose executors time transfers: `transfer_modes()`) into the
`MeasuredCosts` that a planner takes:

    planner = Planner(registry, backends, costs=measured_costs(registry, backends))

Importing it also makes the devices of every backend with tunable kernel shapes
(`BackendInfo.tuning`: Vulkan's workgroup sizes) start from the judge's cached shapes for their
device (`install_picks`; tuned by `lazyfuel.shape_tuning.tune_kernels`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lazyfuel.backends import catalog
from lazyfuel.backends.base import executor
from lazyfuel.contracts.model import Backend
from lazyfuel.judge import Judge, JudgeCache, MeasuredCosts, Progress, TransferProbe, Verdict, cached_picks
from lazyfuel.providers import available_backends, default_registry, register_builtin_providers
from lazyfuel.registry import Registry


def cached_shapes(backend: Backend) -> Callable[[str, dict[str, str], dict[str, Any]], dict[str, Any]]:
    """The judge cache's kernel shapes of `backend` for a device (`fingerprint`, the families'
    `revisions`, the kind's `defaults`) that differ from the defaults: what its devices start from."""
    def shapes(fingerprint: str, revisions: dict[str, str], defaults: dict[str, Any]) -> dict[str, Any]:
        return cached_picks(JudgeCache().load_tuning(), backend.name, fingerprint, revisions, defaults)
    return shapes


def install_picks() -> None:
    """Make the devices opened from now on of every backend with tunable kernel shapes start from
    the judge's cached shapes for them (done when this module is imported; `lazyfuel.api` imports it)."""
    for found in catalog.registered():
        if found.tuning is not None:
            found.tuning.use_cached(cached_shapes(found.backend))


def device_fingerprint(backend: Backend) -> str:
    """The fingerprint of the device `backend` runs on here (the `fingerprint` its package
    registers); LookupError if the backend has none."""
    prints = _fingerprints()
    if backend not in prints:
        known = " ".join(b.name for b in prints)
        raise LookupError(f"no device fingerprint for backend {backend}; known: {known}")
    return prints[backend]()


def _fingerprints() -> dict[Backend, Callable[[], str]]:
    """Each registered backend that fingerprints its device, best first, and how it does."""
    return {found.backend: found.fingerprint for found in catalog.registered()
            if found.fingerprint is not None}


def _backends(backends: Sequence[Backend] | None) -> list[Backend]:
    chosen = list(backends) if backends is not None else available_backends()
    return [b for b in chosen if b in _fingerprints()]


def judge_registry(registry: Registry | None = None, backends: Sequence[Backend] | None = None, *,
                   quick: bool = False, force: bool = False, cache: JudgeCache | None = None,
                   select: Callable[..., bool] | None = None,
                   progress: Progress | None = None) -> list[Verdict]:
    """Measure every binding of `registry` (default: the default registry) on `backends` (default:
    those usable here) that `select(binding)` keeps; cached judgements are reused unless `force`.
    Runs real programs on the devices now."""
    registry = registry if registry is not None else default_registry()
    bindings = [b for b in registry.bindings() if select is None or select(b)]
    verdicts: list[Verdict] = []
    for backend in _backends(backends):
        judge = Judge(executor(backend), device_fingerprint(backend), cache, quick=quick)
        verdicts += judge.judge([b for b in bindings if b.backend is backend], force=force,
                                progress=progress)
    return verdicts


def transfer_modes(backends: Sequence[Backend] | None = None) -> dict[Backend, str]:
    """The transfer mode of each of `backends` (default: those usable here) whose executor times
    its transfers for the judge (Vulkan: the pool's `direct`, `staged`, `import` or `zero-copy`)."""
    register_builtin_providers()
    modes = {}
    for backend in _backends(backends):
        runner = executor(backend)
        if isinstance(runner, TransferProbe):
            modes[backend] = runner.transfer_mode
    return modes


def measured_costs(registry: Registry | None = None, backends: Sequence[Backend] | None = None,
                   cache: JudgeCache | None = None) -> MeasuredCosts:
    """The cached measurements of `registry`'s bindings on this process's devices, and their
    transfer terms (measures nothing; bindings and transfers never judged are priced by the
    priors of their device, `backends.catalog.device_prior`, with one warning per process)."""
    registry = registry if registry is not None else default_registry()
    chosen = _backends(backends)
    prints = {b: device_fingerprint(b) for b in chosen}
    priors = {b: catalog.device_prior(b) for b in chosen}
    return MeasuredCosts.load(registry.bindings(), prints, cache, transfer_modes(chosen), priors)


install_picks()
