"""Hypothesis settings shared by the fuzzing tests: a few seconds in CI, a long run on demand.

Each test asks `fuzz(n)` for its settings: `n` examples normally, `n * LAZYFUEL_FUZZ_SCALE` when
that variable is set, and `n * 25` under `HYPOTHESIS_PROFILE=long` (the run recorded in
docs/reliability.md). Deadlines are off: the machine is shared, and these tests bound work by
construction (what is refused is never evaluated), never by the clock. Run with
`--hypothesis-show-statistics` to see how many examples each test actually ran.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

LONG_SCALE = 25


def _scale() -> int:
    if "LAZYFUEL_FUZZ_SCALE" in os.environ:
        return max(1, int(os.environ["LAZYFUEL_FUZZ_SCALE"]))
    return LONG_SCALE if os.environ.get("HYPOTHESIS_PROFILE") == "long" else 1


SCALE = _scale()


def fuzz(examples: int) -> settings:
    """Settings for a fuzzing test of `examples` examples (times the scale chosen by the environment)."""
    return settings(max_examples=examples * SCALE, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much,
                                           HealthCheck.function_scoped_fixture])
