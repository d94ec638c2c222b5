"""Tuning: the judge picks a kernel family's launch shape (workgroup size x elements per invocation).

A backend whose kernels take their launch shape as specialisation constants (Vulkan: `pool.groups`)
has a default per device kind. The judge times a small grid of candidates around that default on
one workload per family (the caller injects `time_candidate`: the judge never imports backends)
and keeps the default unless a candidate is faster by more than the measured noise:

    pick the fastest candidate c only if  seconds(c) < seconds(default) * (1 - noise),
    noise = max(spread(default) + spread(c), NOISE_FLOOR)

(medians and relative interquartile spreads over rounds that run every candidate in turn, so a
load that comes and goes on the machine falls on all of them alike: `Judge.time_interleaved`),

so the same device gives the same shapes run to run (the planner's tie rule). The result, a
`TuningPick`, is cached with the judgements (`JudgeCache.load_tuning`), keyed by judge version,
device fingerprint, backend, family and the family's code revision, so an edited shader is
tuned again and another device never reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lazyfuel.judge.model import JUDGE_VERSION, NOISE_FLOOR, fingerprint_id

Shape = tuple[int, int]  # (workgroup size, elements per invocation)


@dataclass(frozen=True)
class CandidateTiming:
    """One candidate's median seconds and relative spread on the family's workload."""

    shape: Shape
    seconds: float
    spread: float


@dataclass(frozen=True)
class TuningPick:
    """What the judge chose for one family on one device, and the timings it chose from."""

    key: str
    device_fingerprint: str
    backend: str
    family: str
    revision_hash: str
    default: Shape
    chosen: Shape
    timings: tuple[CandidateTiming, ...]
    reason: str
    quick: bool
    measured_at: str
    judge_version: int = JUDGE_VERSION

    @property
    def changed(self) -> bool:
        """Whether the pick differs from the device kind's default."""
        return self.chosen != self.default

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict (`from_json` reads it back)."""
        return {"key": self.key, "device_fingerprint": self.device_fingerprint, "backend": self.backend,
                "family": self.family, "revision_hash": self.revision_hash, "default": list(self.default),
                "chosen": list(self.chosen), "reason": self.reason, "quick": self.quick,
                "measured_at": self.measured_at, "judge_version": self.judge_version,
                "timings": [[*t.shape, t.seconds, t.spread] for t in self.timings]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TuningPick:
        """The pick `to_json` wrote; KeyError / TypeError / ValueError if the entry is malformed."""
        fields = dict(data)
        fields["default"] = _shape(fields["default"])
        fields["chosen"] = _shape(fields["chosen"])
        fields["timings"] = tuple(CandidateTiming((int(a), int(b)), float(s), float(p))
                                  for a, b, s, p in fields["timings"])
        return cls(**fields)


def _shape(value: Sequence[int]) -> Shape:
    local, elems = value
    return (int(local), int(elems))


def tuning_identity(backend: str, device_fingerprint: str, family: str) -> str:
    """Everything of the key except the revision and the judge version: what a re-tune replaces."""
    return f"{fingerprint_id(device_fingerprint)}/{backend}/tuning/{family}"


def tuning_key(backend: str, device_fingerprint: str, family: str, revision_hash: str) -> str:
    """The cache key of a family's pick on the device `device_fingerprint`."""
    return f"v{JUDGE_VERSION}/{tuning_identity(backend, device_fingerprint, family)}/{revision_hash}"


def shape_text(shape: Shape) -> str:
    """`256x8`: how `LAZYFUEL_VULKAN_GROUPS` writes a shape."""
    return f"{shape[0]}x{shape[1]}"


def neighbours(default: Shape, max_workgroup_size: int, quantum: int = 4) -> list[Shape]:
    """The default and up to three neighbours: twice and half the elements per invocation (kept a
    multiple of `quantum`, gather's quads) and twice (else half) the workgroup size."""
    local, elems = default
    half = elems // 2 if elems // 2 >= quantum and (elems // 2) % quantum == 0 else elems
    wider = local * 2 if local * 2 <= max_workgroup_size else max(local // 2, 1)
    found: list[Shape] = []
    for shape in (default, (local, elems * 2), (local, half), (wider, elems)):
        if shape not in found:
            found.append(shape)
    return found


def decide(default: CandidateTiming, others: Sequence[CandidateTiming]) -> tuple[Shape, str]:
    """The chosen shape and why: the fastest of `others` if it beats `default` by more than the
    noise (module docstring), else the default."""
    if not others:
        return default.shape, f"{shape_text(default.shape)} (default) kept: no other candidate"
    best = min(others, key=lambda t: t.seconds)
    noise = max(default.spread + best.spread, NOISE_FLOOR)
    gain = 1.0 - best.seconds / default.seconds if default.seconds > 0 else 0.0
    if gain > noise:
        return best.shape, (f"{shape_text(best.shape)} picked: {gain:.0%} faster than "
                            f"{shape_text(default.shape)} (default), noise {noise:.0%}")
    if gain > 0:
        return default.shape, (f"{shape_text(default.shape)} (default) kept: {shape_text(best.shape)} "
                               f"{gain:.0%} faster, within noise ({noise:.0%})")
    return default.shape, (f"{shape_text(default.shape)} (default) kept: fastest "
                           f"(next {shape_text(best.shape)}, {-gain:.0%} slower)")


@dataclass(frozen=True)
class TuningTarget:
    """One family to tune: its code revision, the device kind's default, the candidates, and one
    callable per rung running that rung's workload once with a shape (returning the device seconds
    of its steps, or None where the runner has no device clock: the wall clock is used)."""

    family: str
    revision_hash: str
    default: Shape
    candidates: tuple[Shape, ...]
    rungs: tuple[Callable[[Shape], float | None], ...]


def tune_family(backend: str, device_fingerprint: str, target: TuningTarget,
                timings: Sequence[CandidateTiming], *, quick: bool) -> TuningPick:
    """The pick for `target` from its candidates' `timings` (the default's first; `decide`)."""
    chosen, reason = decide(timings[0], timings[1:])
    return TuningPick(
        key=tuning_key(backend, device_fingerprint, target.family, target.revision_hash),
        device_fingerprint=device_fingerprint, backend=backend, family=target.family,
        revision_hash=target.revision_hash, default=target.default, chosen=chosen,
        timings=tuple(timings), reason=f"{target.family}: {reason}", quick=quick,
        measured_at=datetime.now(UTC).isoformat(timespec="seconds"))


def cached_picks(picks: dict[str, TuningPick], backend: str, device_fingerprint: str,
                 revisions: dict[str, str], defaults: dict[str, Shape]) -> dict[str, Shape]:
    """The shapes the judge chose over the defaults, by family, among `picks` (a cache's
    `load_tuning()`): only those of this device and family revision that were tuned against the
    same default (a changed default table is tuned again) and changed it."""
    found = {}
    for family, revision in revisions.items():
        pick = picks.get(tuning_key(backend, device_fingerprint, family, revision))
        if pick is not None and pick.changed and pick.default == defaults.get(family):
            found[family] = pick.chosen
    return found
