"""Fixtures for the FFT tests: the vkfft provider's executors, skipped where a backend cannot run."""

from __future__ import annotations

from typing import Any

import pytest
from fftcheck import VKFFT_BACKENDS, usable_executor


@pytest.fixture(scope="session", params=VKFFT_BACKENDS, ids=lambda b: b.name.lower())
def vkfft(request: pytest.FixtureRequest) -> Any:
    """The vkfft provider's executor on each of its backends (OpenCL, Cuda) that can run here."""
    return usable_executor(request.param)
