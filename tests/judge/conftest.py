"""Fixtures for the judge tests: a private cache directory and a tiny measuring budget."""

from __future__ import annotations

import pytest

from lazyfuel.judge import Budget, JudgeCache

# Two small rungs, few repeats: enough to exercise the ladder, the fit and the cache in milliseconds.
TINY = Budget(sizes=(256, 4096), warmup=1, min_repeats=2, max_repeats=3, min_seconds=0.0,
              max_seconds=0.05)


@pytest.fixture
def cache(tmp_path, monkeypatch) -> JudgeCache:
    """A JudgeCache in a fresh directory, which is also `$LAZYFUEL_CACHE_DIR` for the test."""
    monkeypatch.setenv("LAZYFUEL_CACHE_DIR", str(tmp_path))
    return JudgeCache()


@pytest.fixture
def tiny() -> Budget:
    """The tiny measuring budget."""
    return TINY
