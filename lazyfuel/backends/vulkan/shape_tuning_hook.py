"""How the judge tunes Vulkan's kernel shapes: the `catalog.Tuning` this package registers.

The layer above (`lazyfuel.shape_tuning`, `lazyfuel.judged_costs`) drives the judge over any backend's
`Tuning`; this module says what that is on Vulkan: the families of `TUNED_FAMILIES` on the pool of
the executor given, with the device kind's default shape (`launch_shapes.default_tuning`), the SPIR-V
revision the picks are keyed by (`kernels.family_revision`), the F32 bindings of the family to time
them on, how to run with another shape (the pool's `groups`, restored after), how to apply picks
to the pool, and how pools opened later read the judge cache's picks (`launch_shapes.use_picks`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from lazyfuel.backends.catalog import Shape, TunedFamily, Tuning
from lazyfuel.backends.vulkan.fingerprint import vulkan_fingerprint
from lazyfuel.backends.vulkan.launch_shapes import TUNED_FAMILIES, choose_tuning, default_tuning, use_picks
from lazyfuel.contracts.model import Backend
from lazyfuel.dtypes import DType


def revisions() -> dict[str, str]:
    """Each tuned shader family's SPIR-V revision (what the judge's shape picks are keyed by)."""
    from lazyfuel.backends.vulkan.kernels import family_revision

    return {family: family_revision(family) for family in TUNED_FAMILIES}


def _bindings_of(family: str, bindings: Sequence[Any]) -> list[Any]:
    """The F32 Vulkan bindings among `bindings` whose kernel is the shader `family`."""
    return [b for b in bindings if b.backend is Backend.Vulkan and b.dtypes[0] is DType.F32
            and getattr(b.kernel_ref.impl, "family", None) == family]


def _with_shape(pool: Any, family: str, shape: Shape, run: Callable[[], Any]) -> Any:
    """`run()` with `family`'s shape on `pool` set to `shape` (restored after)."""
    saved = pool.groups[family]
    pool.groups[family] = shape
    try:
        return run()
    finally:
        pool.groups[family] = saved


def families(runner: Any) -> list[TunedFamily]:
    """The tuned families on the pool of `runner` (a `VulkanExecutor`)."""
    pool = runner.pool
    defaults = default_tuning(pool.info.kind).groups
    found = revisions()
    return [TunedFamily(family, found[family], defaults[family], pool.info.max_workgroup_size,
                        partial(_bindings_of, family), partial(_with_shape, pool, family))
            for family in TUNED_FAMILIES]


def apply(runner: Any, picks: Mapping[str, Shape]) -> None:
    """Make `runner`'s pool run the picked shapes now (over its kind's defaults, under overrides)."""
    pool = runner.pool
    pool.groups.update(choose_tuning(pool.info.kind, pool.info.max_workgroup_size, picks=picks).groups)


def use_cached(source: Callable[[str, dict[str, str], dict[str, Shape]], dict[str, Shape]]) -> None:
    """Pools opened from now on start from `source(fingerprint, revisions, defaults)` for their
    device: the judge cache's picks that differ from the kind's defaults."""
    use_picks(lambda info: source(vulkan_fingerprint(info), revisions(),
                                  dict(default_tuning(info.kind).groups)))


TUNING = Tuning(families=families, apply=apply, use_cached=use_cached)
