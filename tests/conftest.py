"""Fixtures shared by every test group."""

from __future__ import annotations

import pytest

from lazyfuel.providers import available_backends


def force_backend(name: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Set `LAZYFUEL_BACKEND=name` for this test, or skip it (saying why) if `name` cannot run here."""
    try:
        available_backends(name)
    except RuntimeError as err:
        pytest.skip(str(err))
    monkeypatch.setenv("LAZYFUEL_BACKEND", name)
    return name


@pytest.fixture(params=["cpu", "vulkan"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test with `LAZYFUEL_BACKEND` forced to each backend usable here (skip the others)."""
    return force_backend(request.param, monkeypatch)


@pytest.fixture
def vulkan(monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test with `LAZYFUEL_BACKEND=vulkan` (skipped where no Vulkan device can run)."""
    return force_backend("vulkan", monkeypatch)
