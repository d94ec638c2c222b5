"""`lazyfuel.judge.model`: a judgement's fitted line and what it derives (bandwidth, the part a
program pays once), its JSON round trip, and the cache key naming everything that may change a
timing (judge version, device, backend, kernel_source, symbol, dtypes, revision)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import pytest

from lazyfuel.judge.model import (
    JUDGE_VERSION,
    Judgement,
    Point,
    dtype_key,
    fingerprint_id,
    identity,
    judgement_key,
)
from lazyfuel.providers import default_registry

FINGERPRINT = "Mesa/llvmpipe/22.3.6/uuid-0"


def judgement(**changes) -> Judgement:
    base = Judgement(key="k", device_fingerprint=FINGERPRINT, kernel_source="numpy", symbol="s",
                     dtypes="[F32,U32,F32]", revision_hash="r", latency_s=2e-5, seconds_per_byte=1e-9,
                     dispatch_s=5e-6, spread=0.02, quick=True, measured_at="2026-12-01T14:00:00Z",
                     points=(Point(256, 2048.0, 2.2e-5, 0.01, 3), Point(4096, 32768.0, 5.3e-5, 0.02, 3)))
    return replace(base, **changes)


def test_the_fitted_line_and_what_it_derives():
    j = judgement()
    assert j.seconds(1e6) == 2e-5 + 1e6 * 1e-9
    assert j.bytes_per_s == pytest.approx(1e9, rel=1e-15)
    assert j.program_overhead_s == pytest.approx(1.5e-5, rel=1e-15)
    assert judgement(seconds_per_byte=0.0).bytes_per_s == float("inf")
    assert judgement(dispatch_s=1.0).program_overhead_s == 0.0  # never negative


def test_it_round_trips_through_json():
    for j in (judgement(), judgement(clock="kernel", dense_seconds_per_byte=5e-10)):
        text = json.dumps(j.to_json())
        back = Judgement.from_json(json.loads(text))
        assert back == j and isinstance(back.points[0], Point)
    assert judgement().to_json()["judge_version"] == JUDGE_VERSION


def test_a_malformed_entry_is_a_key_or_type_error():
    data = judgement().to_json()
    del data["points"]
    with pytest.raises(KeyError):
        Judgement.from_json(data)
    with pytest.raises(TypeError):
        Judgement.from_json({**judgement().to_json(), "points": [{"n": 1}]})


def test_the_key_names_everything_that_may_change_a_timing():
    binding = next(b for b in default_registry().bindings() if b.symbol == "lazyfuel::cpu::gather_f32")
    short = hashlib.sha256(FINGERPRINT.encode()).hexdigest()[:12]
    assert fingerprint_id(FINGERPRINT) == short and len(short) == 12
    assert dtype_key(binding) == "[F32,U32,F32]"
    assert identity(binding, FINGERPRINT) == f"{short}/Cpu/numpy/lazyfuel::cpu::gather_f32/[F32,U32,F32]"
    assert judgement_key(binding, FINGERPRINT) == (f"v{JUDGE_VERSION}/{identity(binding, FINGERPRINT)}/"
                                                   f"{binding.revision_hash}")
    other = replace(binding, revision_hash="0" * 16)
    assert identity(other, FINGERPRINT) == identity(binding, FINGERPRINT)  # a re-measure replaces it
    assert judgement_key(other, FINGERPRINT) != judgement_key(binding, FINGERPRINT)
    assert judgement_key(binding, FINGERPRINT + "-2") != judgement_key(binding, FINGERPRINT)
