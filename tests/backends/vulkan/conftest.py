"""Fixtures for the Vulkan backend tests: the real device pool, poisoned, with validation checked.

Every test runs on the process's real device pool (lavapipe here, a GPU where one exists). Its
allocator poisons each allocation with 0xA5 bytes, so an element a kernel forgets to write shows
up. When `LAZYFUEL_VALIDATION` is on (as `make test` sets) a test fails if the Khronos validation
layer reported anything while it ran (`no_validation_messages` in tests/conftest.py).
"""

from __future__ import annotations

import pytest
from vulkan_helpers import POISON

from lazyfuel.backends.vulkan import get_pool, register
from lazyfuel.backends.vulkan.executor import VulkanExecutor


@pytest.fixture(scope="session")
def pool():
    """The process's device pool, poisoning every allocation."""
    register()
    found = get_pool()
    found.allocator.poison = POISON
    return found


@pytest.fixture
def importing(pool):
    """The pool importing host tables of any size (lavapipe's imports from 256 KiB by default)."""
    saved = pool.allocator.import_min
    pool.allocator.import_min = 1
    yield pool
    pool.allocator.import_min = saved


@pytest.fixture(scope="session")
def executor(pool):
    """A VulkanExecutor on the shared pool."""
    return VulkanExecutor()


@pytest.fixture(params=["storage", "address"])
def memory_mode(request, pool):
    """Run the test with storage buffers (push descriptors) and again with device addresses."""
    if request.param == "storage" and pool.push_descriptor_fn is None:
        pytest.skip("the device has no push descriptors")
    saved = pool.ssbo
    pool.ssbo = request.param == "storage"
    yield request.param
    pool.ssbo = saved


@pytest.fixture(params=["sequential", "coalesced"])
def mapping(request, pool):
    """Run the test with each invocation walking consecutive positions (CPUs) and again with
    neighbouring invocations on neighbouring positions (GPUs)."""
    saved = pool.coalesced
    pool.coalesced = request.param == "coalesced"
    yield request.param
    pool.coalesced = saved
