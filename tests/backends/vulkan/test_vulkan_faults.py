"""The fault-injection hook (`backends.vulkan.faults`) by itself: `after` calls pass, then `count`
get the failure code, `fired` counts them; the hook disarms on leaving; bad armings are refused by
name. (What lazyfuel does with the faults, on the real pool: tests/reliability/test_faults_*.)"""

from __future__ import annotations

import pytest

from lazyfuel.backends.vulkan import faults
from lazyfuel.backends.vulkan.check import VK_ERROR_DEVICE_LOST, VK_ERROR_OUT_OF_DEVICE_MEMORY


def test_after_calls_pass_then_count_calls_fail_and_are_counted() -> None:
    assert faults.due(faults.ALLOCATE) == 0 and not faults.armed
    with faults.out_of_device_memory(count=2, after=1) as oom:
        assert faults.armed
        got = [faults.due(faults.ALLOCATE) for _ in range(5)]
        assert got == [0, VK_ERROR_OUT_OF_DEVICE_MEMORY, VK_ERROR_OUT_OF_DEVICE_MEMORY, 0, 0]
        assert faults.due(faults.WAIT) == 0  # another site is not armed
        assert (oom.fired, oom.calls) == (2, 5)
    assert not faults.armed and faults.due(faults.ALLOCATE) == 0


def test_device_loss_at_submit_and_bad_armings_refused_by_name() -> None:
    with faults.device_lost(at=faults.SUBMIT) as lost:
        assert faults.due(faults.SUBMIT) == VK_ERROR_DEVICE_LOST and lost.fired == 1
        with pytest.raises(ValueError, match="faults are already armed at vkQueueSubmit"):
            with faults.device_lost(at=faults.SUBMIT):
                pass
    with pytest.raises(ValueError, match=r"device loss is reported by vkQueueSubmit or vkWaitForFences"):
        faults.device_lost(at=faults.ALLOCATE)
    with pytest.raises(ValueError, match=r"fault site 'vkMapMemory': expected one of vkAllocateMemory"):
        with faults.inject("vkMapMemory", VK_ERROR_DEVICE_LOST):
            pass
    with pytest.raises(ValueError, match=r"fault counts must be >= 0, got count=-1, after=0"):
        with faults.inject(faults.WAIT, VK_ERROR_DEVICE_LOST, count=-1):
            pass
    assert not faults.armed
