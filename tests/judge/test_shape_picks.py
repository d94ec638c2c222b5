"""The judge's launch-shape tuning (judge/shape_picks.py): the decision rule on fixed timings (a fake
timing source, so the decision is deterministic), the cache (stored, superseded by a new revision,
read back for a device), and the neighbours it tries."""

from __future__ import annotations

import json

import pytest

from lazyfuel.backends.cpu.executor import CpuExecutor
from lazyfuel.judge import Judge, TuningTarget, cached_picks, neighbours
from lazyfuel.judge.shape_picks import CandidateTiming, decide

DEVICE = "fake device | for the tuning tests"
DEFAULT = (256, 8)


def fixed(times: dict[tuple[int, int], float], calls: list | None = None):
    """A rung that 'runs' a shape in the fixed seconds `times` gives it (the device clock's answer)."""
    def run(shape):
        if calls is not None:
            calls.append(shape)
        return times[shape]
    return run


def target(times, revision="rev1", calls=None, family="index_select") -> TuningTarget:
    return TuningTarget(family, revision, DEFAULT, tuple(times), (fixed(times, calls),))


def judge(cache, tiny, quick=True) -> Judge:
    return Judge(CpuExecutor(), DEVICE, cache, budget=tiny, quick=quick)


def test_a_candidate_faster_than_the_noise_floor_is_picked_and_a_near_tie_keeps_the_default(cache, tiny):
    clear = {DEFAULT: 1.0e-3, (256, 16): 0.8e-3, (256, 4): 1.2e-3}
    tie = {DEFAULT: 1.0e-3, (256, 16): 0.98e-3, (256, 4): 1.2e-3}  # 2 %: under the 3 % floor
    (won, measured), = judge(cache, tiny).tune([target(clear)])
    assert measured and won.chosen == (256, 16) and won.changed and "20% faster" in won.reason
    (kept, _), = judge(cache, tiny).tune([target(tie, family="gather")])
    assert kept.chosen == DEFAULT and not kept.changed and "within noise (3%)" in kept.reason
    assert [t.shape for t in won.timings] == [DEFAULT, (256, 16), (256, 4)]  # the default first


def test_the_spreads_of_both_widen_the_tie():
    default = CandidateTiming(DEFAULT, 1.0e-3, 0.20)
    assert decide(default, [CandidateTiming((64, 4), 0.8e-3, 0.05)])[0] == DEFAULT  # 20 % < 20 + 5 %
    assert decide(default, [CandidateTiming((64, 4), 0.7e-3, 0.05)])[0] == (64, 4)  # 30 % > 25 %
    assert decide(default, [CandidateTiming((64, 4), 1.5e-3, 0.0)])[0] == DEFAULT


def test_picks_are_cached_by_device_and_revision_and_a_new_revision_is_tuned_again(cache, tiny):
    times = {DEFAULT: 1.0e-3, (128, 16): 0.5e-3}
    calls: list = []
    judge(cache, tiny).tune([target(times, calls=calls)])
    first = len(calls)
    (again, measured), = judge(cache, tiny).tune([target(times, calls=calls)])
    assert not measured and len(calls) == first and again.chosen == (128, 16)
    revisions, defaults = {"index_select": "rev1"}, {"index_select": DEFAULT}
    picks = cached_picks(cache.load_tuning(), "Cpu", DEVICE, revisions, defaults)
    assert picks == {"index_select": (128, 16)}
    assert cached_picks(cache.load_tuning(), "Cpu", "another device", revisions, defaults) == {}
    assert cached_picks(cache.load_tuning(), "Cpu", DEVICE, revisions, {"index_select": (64, 4)}) == {}

    edited = {DEFAULT: 1.0e-3, (128, 16): 1.2e-3}  # the shader changed: the old pick no longer holds
    (retuned, measured), = judge(cache, tiny).tune([target(edited, revision="rev2", calls=calls)])
    assert measured and len(calls) > first and retuned.chosen == DEFAULT
    assert cached_picks(cache.load_tuning(), "Cpu", DEVICE, revisions, defaults) == {}  # rev1 superseded
    stored = json.loads(cache.path.read_text())["tuning"]
    assert [v["revision_hash"] for v in stored.values()] == ["rev2"]


def test_quick_picks_are_measured_again_by_a_full_judge_and_force_measures_again(cache, tiny):
    times = {DEFAULT: 1.0e-3, (128, 16): 0.5e-3}
    judge(cache, tiny).tune([target(times)])
    assert judge(cache, tiny, quick=False).tune([target(times)])[0][1]
    assert not judge(cache, tiny, quick=True).tune([target(times)])[0][1]
    assert judge(cache, tiny, quick=True).tune([target(times)], force=True)[0][1]


@pytest.mark.parametrize("default, limit, expected", [
    ((256, 8), 1024, [(256, 8), (256, 16), (256, 4), (512, 8)]),
    ((64, 4), 1024, [(64, 4), (64, 8), (128, 4)]),  # 2 elements would break gather's quads
    ((1024, 8), 1024, [(1024, 8), (1024, 16), (1024, 4), (512, 8)]),  # the device's limit
])
def test_neighbours_stay_legal_for_the_shaders(default, limit, expected):
    assert neighbours(default, limit) == expected
