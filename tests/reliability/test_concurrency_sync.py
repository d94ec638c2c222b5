"""Synchronization validation can fail: deliberate hazards through the real Batch are reported.

`make test` runs the suite with `LAZYFUEL_VALIDATION=sync`, and tests/conftest.py fails a test
on any message from an open pool. These tests prove the messages come: on a pool of their own
with synchronization validation on, two copies into the same bytes with no barrier between
them (write after write), and a copy reading bytes an earlier copy wrote (read after write),
are reported; the same commands with `batch.barrier()` between them are not.
"""

from __future__ import annotations

import pytest
import vulkan as vk

from lazyfuel.backends.vulkan.instance import SYNC, VALIDATION_LAYER, validation_requested
from lazyfuel.backends.vulkan.pool import DevicePool
from lazyfuel.providers import available_backends

NBYTES = 4096


@pytest.fixture(scope="module")
def sync_pool():
    """A pool of its own with synchronization validation (its messages are these tests' to read)."""
    try:
        available_backends("vulkan")
    except RuntimeError as err:
        pytest.skip(str(err))
    if VALIDATION_LAYER not in {p.layerName for p in vk.vkEnumerateInstanceLayerProperties()}:
        pytest.skip(f"{VALIDATION_LAYER} is not installed")
    pool = DevicePool(validation=SYNC)
    yield pool
    pool.close()


def messages_of(pool: DevicePool, hazard: str, barrier: bool) -> list[str]:
    """Record `hazard` ("waw": copy a->b twice; "raw": copy a->b, then b->c) in one batch, with or
    without a barrier between the two copies; run it; the messages the layer reported."""
    pool.validation_messages.clear()
    with pool.batch() as batch:
        a, b, c = batch.alloc(NBYTES), batch.alloc(NBYTES), batch.alloc(NBYTES)
        batch.copy(a, 0, b, 0, NBYTES)
        if barrier:
            batch.barrier()
        if hazard == "waw":
            batch.copy(a, 0, b, 0, NBYTES)
        else:
            batch.copy(b, 0, c, 0, NBYTES)
        batch.run()
    found = list(pool.validation_messages)
    pool.validation_messages.clear()
    return found


@pytest.mark.parametrize(("hazard", "name"), [("waw", "SYNC-HAZARD-WRITE-AFTER-WRITE"),
                                              ("raw", "SYNC-HAZARD-READ-AFTER-WRITE")])
def test_a_missing_barrier_is_reported(sync_pool, hazard, name):
    found = messages_of(sync_pool, hazard, barrier=False)
    assert len(found) == 1 and name in found[0] and "vkCmdCopyBuffer" in found[0], found


@pytest.mark.parametrize("hazard", ["waw", "raw"])
def test_the_same_commands_with_a_barrier_are_clean(sync_pool, hazard):
    assert messages_of(sync_pool, hazard, barrier=True) == []


@pytest.mark.parametrize(("value", "level"), [("sync", SYNC), (" SYNC ", SYNC), ("1", True), ("on", True),
                                              ("", False), ("0", False), ("no", False)])
def test_validation_level_from_the_environment(monkeypatch, value, level):
    monkeypatch.setenv("LAZYFUEL_VALIDATION", value)
    assert validation_requested() == level
