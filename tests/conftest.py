"""Fixtures shared by every test group."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from lazyfuel.providers import available_backends
from lazyfuel.settings import config


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


@pytest.fixture(params=["cpu", "auto", "vulkan"])
def every_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """As `backend`, and `LAZYFUEL_BACKEND=auto` (the planner's choice) besides."""
    return force_backend(request.param, monkeypatch)


@pytest.fixture
def vulkan(monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test with `LAZYFUEL_BACKEND=vulkan` (skipped where no Vulkan device can run)."""
    return force_backend("vulkan", monkeypatch)


def _open_vulkan_pools() -> list:
    """The Vulkan pools this process has open (none, and nothing imported, before one is used)."""
    pool = sys.modules.get("lazyfuel.backends.vulkan.pool")
    return pool.open_pools() if pool is not None else []


@pytest.fixture(autouse=True)
def no_validation_messages():
    """Fail the test if the Vulkan validation layer reported any warning or error while it ran, on
    any pool open after it (`LAZYFUEL_VALIDATION=1` or `sync`, as `make test` sets; with the layer
    off there are never messages)."""
    for pool in _open_vulkan_pools():
        pool.validation_messages.clear()
    yield
    messages = []
    for pool in _open_vulkan_pools():
        messages += [f"{pool.label}: {m}" for m in pool.validation_messages]
        pool.validation_messages.clear()
    assert not messages, f"validation layer reported {len(messages)} message(s):\n" + "\n".join(messages[:10])


@pytest.fixture
def monkeypatch(monkeypatch: pytest.MonkeyPatch):
    """pytest's monkeypatch; lazyfuel reads the environment once (`lazyfuel.config`), so setting
    or deleting a variable through it reads the environment again, as does undoing them."""
    setenv, delenv = monkeypatch.setenv, monkeypatch.delenv

    def set_and_reload(*args, **kwargs):
        setenv(*args, **kwargs)
        config.reload()

    def del_and_reload(*args, **kwargs):
        delenv(*args, **kwargs)
        config.reload()

    monkeypatch.setenv, monkeypatch.delenv = set_and_reload, del_and_reload
    yield monkeypatch
    monkeypatch.undo()
    config.reload()


@pytest.fixture
def unmeasured_quietly():
    """Plan with the priors and no warning about it: the once-per-process unmeasured-cost notice
    silenced, and free to be given again after the test (`judge.costs.reset_warning`)."""
    import warnings

    from lazyfuel.judge.costs import reset_warning

    reset_warning()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
    reset_warning()


@pytest.fixture
def bits_equal():
    """`bits_equal(got, want)`: assert the same shape, dtype and bytes."""
    return assert_bits_equal


def assert_bits_equal(got: np.ndarray, want: np.ndarray) -> None:
    """Same shape, same dtype, same bytes (NaN payloads and -0.0 included)."""
    want = np.asarray(want)
    assert isinstance(got, np.ndarray), type(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    g = np.ascontiguousarray(got).reshape(-1).view(np.uint8)
    w = np.ascontiguousarray(want).reshape(-1).view(np.uint8)
    assert np.array_equal(g, w)
