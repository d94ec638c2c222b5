"""Fixtures for the FFT tests: the OpenCL executor, skipped where the backend cannot run."""

from __future__ import annotations

from typing import Any

import pytest

from lazyfuel.backends.base import executor
from lazyfuel.contracts.model import Backend
from lazyfuel.providers import backend_usable, register_builtin_providers


@pytest.fixture(scope="session")
def opencl() -> Any:
    """The OpenCL executor; the test is skipped where the backend cannot run."""
    register_builtin_providers()
    if not backend_usable(Backend.OpenCL):
        pytest.skip("the OpenCL backend is not usable here (pyopencl, pyvkfft or an OpenCL device missing)")
    return executor(Backend.OpenCL)
