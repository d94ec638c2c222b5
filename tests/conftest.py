"""Fixtures shared by every test group."""

from __future__ import annotations

import pytest

from lazyfuel.providers import available_backends


@pytest.fixture(params=["cpu", "vulkan"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test with `LAZYFUEL_BACKEND` forced to each backend usable here (skip the others)."""
    try:
        available_backends(request.param)
    except RuntimeError as err:
        pytest.skip(str(err))
    monkeypatch.setenv("LAZYFUEL_BACKEND", request.param)
    return request.param
