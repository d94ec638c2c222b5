"""Fixtures of the tests of several resident blocks per task (test_batched, test_held_run)."""

from __future__ import annotations

import pytest

POISON = 0xA5  # every allocation's bytes before a kernel writes (as tests/backends/vulkan's pool)


@pytest.fixture
def each_submit(vulkan):
    """The process's real device pool, poisoning every allocation (an unwritten byte shows)."""
    from lazyfuel.backends.vulkan import get_pool, register

    register()
    found = get_pool()
    found.allocator.poison = POISON
    return found


@pytest.fixture
def pool(each_submit, monkeypatch):
    """`each_submit`'s pool, a batched task's blocks all in one submit (submits count tasks)."""
    from lazyfuel.backends.vulkan import executor

    monkeypatch.setattr(executor, "PROGRAMS_PER_SUBMIT", 1 << 20, raising=False)
    return each_submit
