"""Device lost (issue 8, item 3): the pool is rebuilt and the task retried once; twice is a clear error.

`faults.device_lost` makes the real vkQueueSubmit (not made) or vkWaitForFences (after the real
wait) report VK_ERROR_DEVICE_LOST on the real lavapipe pool. The lost pool is destroyed once the
work in flight on it has ended, with every block freed; the fresh one gives exact results.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel.backends.vulkan import faults
from lazyfuel.backends.vulkan.check import DeviceLostError
from reliability import fault_fixtures

fault_pools = fault_fixtures.fault_pools  # the fixture

RNG = np.random.default_rng(80)
X = RNG.standard_normal((64, 40)).astype(np.float32)
IDX = RNG.integers(0, 40, 24)
MASK = RNG.random((64, 24)) < 0.3


def fused(x: np.ndarray = X) -> lf.Array:
    """view -> Contiguize -> IndexSelect -> MaskedFill, one task (one command buffer) per block."""
    return lf.masked_fill(lf.index_select(lf.from_array(x, chunks=(32, 40))[:, ::-1], 1, IDX), MASK, -1.0)


def expected(x: np.ndarray = X) -> np.ndarray:
    return np.where(MASK, np.float32(-1), x[:, ::-1][:, IDX])


@pytest.mark.parametrize("at", [faults.SUBMIT, faults.WAIT])
@pytest.mark.parametrize("after", [0, 1])
def test_a_loss_rebuilds_the_pool_and_retries_the_task(fault_pools, at, after):
    first = fault_pools.current()
    with faults.device_lost(count=1, after=after, at=at) as lost:
        got = fused().compute(scheduler="sync")
    assert lost.fired == 1
    np.testing.assert_array_equal(got, expected())
    fresh = fault_pools.current()
    assert fresh is not first and first.lost and first.closed
    assert first.allocator.in_use == 0 and first.allocator.reserved == 0  # destroyed, nothing leaked
    np.testing.assert_array_equal(fused().compute(scheduler="sync"), expected())
    assert fresh.allocator.in_use == 0 and fault_pools.current() is fresh


@pytest.mark.parametrize("at", [faults.SUBMIT, faults.WAIT])
def test_two_losses_in_a_row_are_a_clear_error_then_the_next_task_succeeds(fault_pools, at):
    first = fault_pools.current()
    with faults.device_lost(count=2, at=at) as lost, pytest.raises(DeviceLostError) as caught:
        fused().compute(scheduler="sync")
    assert lost.fired == 2
    assert str(caught.value) == (
        f"{at} failed with VK_ERROR_DEVICE_LOST (-4): the device [0] {first.info.name} was lost twice "
        "running this program (the pool was rebuilt after each loss, and the next task runs on a fresh one)")
    second = fault_pools.held()
    assert first.lost and second is not first and second.lost
    np.testing.assert_array_equal(fused().compute(scheduler="sync"), expected())
    third = fault_pools.current()
    assert third not in (first, second) and not third.lost
    assert second.closed and second.allocator.reserved == 0


def test_a_loss_while_threads_run_retries_and_every_result_is_exact(fault_pools):
    """Four threads compute their own arrays while the device is lost twice (each time once):
    the thread that sees a loss retries on the rebuilt pool; the others finish on the old pool
    or pick up the new one; the old pools are destroyed only after their last batch."""
    inputs = [RNG.standard_normal((64, 40)).astype(np.float32) for _ in range(4)]
    wanted = [expected(x) for x in inputs]
    errors: list[BaseException] = []
    wrong: list[int] = []
    start = threading.Barrier(len(inputs) + 1)

    def work(i: int) -> None:
        start.wait()
        try:
            for _ in range(12):
                if not np.array_equal(fused(inputs[i]).compute(scheduler="sync"), wanted[i]):
                    wrong.append(i)
        except BaseException as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    with faults.device_lost(count=1, after=10, at=faults.WAIT) as on_wait, \
            faults.device_lost(count=1, after=30, at=faults.SUBMIT) as on_submit:
        start.wait()
        for t in threads:
            t.join()
    assert not errors, errors
    assert not wrong
    assert on_wait.fired == 1 and on_submit.fired == 1
    current = fault_pools.current()
    lost = [pool for pool in fault_pools.seen if pool.lost]
    assert lost and all(pool.closed and pool.allocator.reserved == 0 for pool in lost)
    np.testing.assert_array_equal(fused().compute(scheduler="threads"), expected())
    assert current.allocator.in_use == 0


def test_an_injected_loss_goes_through_the_same_translation_as_a_real_one(fault_pools):
    """The hook replaces the VkResult the real call's check sees: the pool marks itself lost."""
    pool = fault_pools.current()
    with faults.device_lost(count=1) as lost, pytest.raises(DeviceLostError) as caught, pool.batch() as batch:
        batch.run()
    assert lost.fired == 1 and pool.lost
    assert str(caught.value) == "vkWaitForFences failed with VK_ERROR_DEVICE_LOST (-4)"
    with pytest.raises(DeviceLostError, match="its device was lost; get_pool\\(\\) gives a new one"):
        pool.batch()
    with pytest.raises(ValueError, match="already armed"), faults.device_lost(), faults.device_lost():
        pass
    with pytest.raises(ValueError, match="not 'vkAllocateMemory'"):
        faults.device_lost(at=faults.ALLOCATE)
    assert not faults.armed
