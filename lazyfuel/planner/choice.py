"""The planner's decisions, kept for `explain`: the candidate plans it priced and why one won.

For each select node the planner prices every binding that can run it — a kernel reading its
inputs as they are, or Contiguize steps first and then a kernel that needs contiguous inputs — and
for each chain it prices one program per allowed backend. A `Choice` records those candidates (in
declared priority order), their estimated costs and where each cost came from (the judge's
measurements or the shared priors), which one won and why:

- `cheaper`: it costs less than every other candidate, by more than the measured noise;
- `priority tie`: another candidate is as cheap within the measured noise (or cheaper by less than
  it), and this one was declared first (backends: their registered ranks,
  `providers.backend_priority()`; bindings: the order of the provider's documents and of the
  blocks in them), so plans stay stable run to run;
- `only candidate`: nothing else can run it (a backend forced by `LAZYFUEL_BACKEND` shows here).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Candidate:
    """One plan the planner priced: what it runs, its estimated seconds, and the cost's source."""

    plan: str
    cost: float
    source: str = "prior"  # "measured", "prior" or "mixed" (some steps measured)
    note: str = ""  # why it could not run, when `cost` is not a number
    transfer: float = 0.0  # the part of `cost` that moves inputs in and results out (a backend's)


@dataclass(frozen=True)
class Choice:
    """What was decided (`what`), among `candidates` (declared priority order), and why."""

    what: str
    candidates: tuple[Candidate, ...]
    chosen: int
    why: str

    @property
    def winner(self) -> Candidate:
        return self.candidates[self.chosen]


def decide(what: str, candidates: Sequence[Candidate], cheaper: Callable[[int, int], bool]) -> Choice:
    """Pick among priced `candidates` (unpriceable ones have a `note` and a NaN cost): walking in
    declared order, a candidate replaces the incumbent only when `cheaper(i, incumbent)`; the reason
    names the runner-up. Raises ValueError if no candidate is priced."""
    priced = [i for i, c in enumerate(candidates) if not c.note]
    if not priced:
        raise ValueError(f"{what}: no candidate can run")
    best = priced[0]
    for i in priced[1:]:
        if cheaper(i, best):
            best = i
    others = [i for i in priced if i != best]
    if not others:
        why = "only candidate" + (" (the others cannot run it)" if len(candidates) > 1 else "")
    else:
        runner = min(others, key=lambda i: candidates[i].cost)
        gap = _gap(candidates[best].cost, candidates[runner].cost)
        if cheaper(best, runner):
            why = f"cheaper (the next costs {gap})"
        else:
            why = f"priority tie (the next costs {gap}, within the measured noise); declared first"
    return Choice(what, tuple(candidates), best, why)


def _gap(won: float, other: float) -> str:
    """How the runner-up's cost compares with the winner's, in words."""
    if won <= 0:
        return f"{other:.3g} s"
    ratio = other / won
    return f"{ratio:.2f}x as much" if ratio >= 2 else f"{(ratio - 1) * 100:+.1f}%"


def cost_source(measured: Sequence[bool]) -> str:
    """'measured' when every step's cost was measured, 'prior' when none was, else 'mixed'."""
    if all(measured):
        return "measured"
    return "mixed" if any(measured) else "prior"
