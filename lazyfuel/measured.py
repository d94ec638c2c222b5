"""The judge wired to this process's backends: device fingerprints, judging, measured costs.

The judge layer cannot import backends, so this top-layer module injects what it needs: each
backend's executor and the fingerprint of the device it runs on (the `fingerprint` its package
registers, `backends.catalog`). `judge_registry()` measures the default registry (what
`lazyfuel judge` runs) and `measured_costs()` loads the cached measurements (and each device's
transfer term, for the backends whose executors time transfers: `transfer_modes()`) into the
`MeasuredCosts` that a planner takes:

    planner = Planner(registry, backends, costs=measured_costs(registry, backends))

Importing it also makes Vulkan pools start from the judge's cached kernel shapes for their device
(`vulkan_picks`, `install_picks`; tuned by `lazyfuel.tuned.tune_vulkan`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lazyfuel.backends import catalog
from lazyfuel.backends.base import executor
from lazyfuel.backends.vulkan.fingerprint import vulkan_fingerprint
from lazyfuel.backends.vulkan.tuning import TUNED_FAMILIES, default_tuning, use_picks
from lazyfuel.contracts.model import Backend
from lazyfuel.judge import Judge, JudgeCache, MeasuredCosts, Progress, TransferProbe, Verdict, cached_picks
from lazyfuel.judge.priors import device_prior
from lazyfuel.providers import available_backends, default_registry, register_builtin_providers
from lazyfuel.registry import Registry


def vulkan_revisions() -> dict[str, str]:
    """Each tuned shader family's SPIR-V revision (what the judge's shape picks are keyed by)."""
    from lazyfuel.backends.vulkan.kernels import family_revision

    return {family: family_revision(family) for family in TUNED_FAMILIES}


def vulkan_picks(info: Any, cache: JudgeCache | None = None) -> dict[str, tuple[int, int]]:
    """The judge's shapes for the Vulkan device `info` that differ from its kind's defaults."""
    cache = cache if cache is not None else JudgeCache()
    return cached_picks(cache.load_tuning(), Backend.Vulkan.name, vulkan_fingerprint(info),
                        vulkan_revisions(), dict(default_tuning(info.kind).groups))


def install_picks() -> None:
    """Make Vulkan pools created from now on start from the judge's cached shapes for their device
    (done when this module is imported; `lazyfuel.api` imports it)."""
    use_picks(vulkan_picks)


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
    priors of their device's kind, `judge.priors`, with one warning per process)."""
    registry = registry if registry is not None else default_registry()
    chosen = _backends(backends)
    prints = {b: device_fingerprint(b) for b in chosen}
    priors = {b: device_prior(b, device_kind(b)) for b in chosen}
    return MeasuredCosts.load(registry.bindings(), prints, cache, transfer_modes(chosen), priors)


def device_kind(backend: Backend) -> str | None:
    """The kind of device `backend` runs on here, where it reports one (Vulkan: `DeviceInfo.kind`,
    e.g. `cpu` for lavapipe, `discrete`); None for the others. What its cost priors depend on."""
    if backend is not Backend.Vulkan:
        return None
    from lazyfuel.backends.vulkan import get_pool

    return get_pool().info.kind


install_picks()
