"""Per-device specialisation of the kernels: workgroup size, elements per invocation, mapping.

Every kernel family runs with specialisation constants 0 (workgroup size) and 1 (elements, or
words, per invocation) taken from its pool's `groups`, and constant 4 (the mapping of positions to
invocations) from its pool's `coalesced`. They differ by device kind, as measured:

- GPUs (the H200): 64 x 4, coalesced (neighbouring invocations on neighbouring memory): the
  vectorised quads of `benchmarks/probes/kernels_gpu.py`.
- CPU devices (lavapipe): 256 x 8, sequential (each invocation walks consecutive positions);
  strided_select keeps 64 x 4 (its walk is sized for that and was not re-measured).
  llvmpipe runs 8 invocations as SIMD lanes but moves memory lane by lane, 32-bit component by
  component; more positions per invocation amortise the per-invocation divisions and index loads
  (`benchmarks/probes/select_tuning.py`: index_select and gather +10-16 %, the others +2-7 %, on the
  2-CPU VM; BENCHMARKS.md, "tuning").

The judge may replace a family's shape for one device (`lazyfuel judge`: `judge.shape_picks` times
the default and a few neighbours, `TUNED_FAMILIES`, and keeps the default unless another is faster
by more than the noise). The layer above injects a `PicksSource` (`use_picks`; `lazyfuel.judged_costs`
reads the judge cache) that a pool asks when it is created. Precedence: the environment's
overrides, then the judge's picks, then the device kind's defaults; no picks: the defaults.

Overrides, read when a pool is created:
`LAZYFUEL_VULKAN_GROUPS=256x8` (every family) or `index_select=256x8,gather=64x4` (those listed);
`LAZYFUEL_VULKAN_MAPPING=coalesced|sequential`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lazyfuel.settings import check, config

FAMILIES = ("contiguize", "index_select", "gather", "masked_fill", "strided_select", "host_gather")
# the families the judge tunes (strided_select's walk is sized for its 64 x 4 and is left alone)
TUNED_FAMILIES = ("contiguize", "index_select", "gather", "masked_fill")
ELEMS_QUANTUM = 4  # elements per invocation stay a multiple of this (gather's quads)
GPU_GROUPS = (64, 4)
CPU_GROUPS = (256, 8)
GROUPS_ENV = "LAZYFUEL_VULKAN_GROUPS"
MAPPING_ENV = "LAZYFUEL_VULKAN_MAPPING"


@dataclass(frozen=True)
class Tuning:
    """One device's choices: (workgroup size, elements per invocation) per family, and mapping."""

    groups: Mapping[str, tuple[int, int]]
    coalesced: bool


def default_tuning(kind: str) -> Tuning:
    """The measured defaults for a device of `kind` ("cpu" for lavapipe; anything else a GPU)."""
    if kind != "cpu":
        return Tuning({f: GPU_GROUPS for f in FAMILIES}, coalesced=True)
    return Tuning({f: CPU_GROUPS if f != "strided_select" else GPU_GROUPS for f in FAMILIES}, coalesced=False)


def parse_groups(text: str, max_workgroup_size: int) -> dict[str, tuple[int, int]]:
    """`256x8` (every family) or `family=LOCALxELEMS,...` -> {family: (local, elems)}; ValueError
    naming the bad part and what is accepted."""
    found: dict[str, tuple[int, int]] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        family, _, value = part.rpartition("=")
        families = [family] if family else list(FAMILIES)
        if family and family not in FAMILIES:
            raise ValueError(f"{GROUPS_ENV}: unknown kernel family {family!r} in {part!r}; "
                             f"families: {', '.join(FAMILIES)}")
        local, sep, elems = value.lower().partition("x")
        if not (sep and local.isdigit() and elems.isdigit()):
            raise ValueError(f"{GROUPS_ENV}: {part!r} is not LOCALxELEMS (e.g. 256x8) or "
                             f"family=LOCALxELEMS")
        pair = (int(local), int(elems))
        if not (1 <= pair[0] <= max_workgroup_size and pair[1] >= 1):
            raise ValueError(f"{GROUPS_ENV}: {part!r} needs a workgroup size in 1..{max_workgroup_size} "
                             f"and at least 1 element per invocation")
        found.update({f: pair for f in families})
    return found


PicksSource = Callable[[Any], Mapping[str, tuple[int, int]]]  # DeviceInfo -> {family: shape}
_picks_source: PicksSource | None = None


def use_picks(source: PicksSource | None) -> None:
    """Make pools created from now on ask `source(device_info)` for the judge's shapes (None: none)."""
    global _picks_source
    _picks_source = source


def measured_picks(info: Any, max_workgroup_size: int) -> dict[str, tuple[int, int]]:
    """The judge's shapes for the device `info` from the injected source (`use_picks`), legal
    ones only; {} without a source. A source that fails warns once and gives {}."""
    if _picks_source is None:
        return {}
    try:
        found = dict(_picks_source(info))
    except Exception as err:  # a broken cache must not stop a pool opening: the defaults run
        warnings.warn(f"the judge's kernel shapes for {info.name} could not be read ({err}); "
                      "using the defaults", RuntimeWarning, stacklevel=2)
        return {}
    return {f: (int(a), int(b)) for f, (a, b) in found.items()
            if f in FAMILIES and 1 <= a <= max_workgroup_size and b >= 1 and b % ELEMS_QUANTUM == 0}


def choose_tuning(kind: str, max_workgroup_size: int, picks: Mapping[str, tuple[int, int]] | None = None,
                  groups: str | None = None, mapping: str | None = None) -> Tuning:
    """The defaults for `kind`, the judge's `picks` over them, the overrides over both: `groups`
    and `mapping` (default `lazyfuel.config.vulkan_groups` and `.vulkan_mapping`)."""
    base = default_tuning(kind)
    text = config.vulkan_groups if groups is None else groups
    chosen = {**base.groups, **(picks or {}), **parse_groups(text or "", max_workgroup_size)}
    if mapping is None:
        mapping = config.vulkan_mapping
    else:
        mapping = check("vulkan_mapping", mapping, source=MAPPING_ENV)
    coalesced = base.coalesced if mapping == "auto" else mapping == "coalesced"
    return Tuning(chosen, coalesced)
