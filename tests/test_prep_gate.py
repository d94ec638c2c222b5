"""Tasks take turns at their Python (`lazyfuel.prep_gate`): one turn at a time by default, given
up at the task's first submit, fence wait, large host copy or CPU program, never a deadlock (a
thread waits `WAIT_LIMIT_S` at most); and computes through the gate stay bit-exact on every backend
and leave no turn held."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazyfuel as lf
from lazyfuel import hostcopy, prep_gate


def _enter_in_thread(entered: threading.Event, leave: threading.Event, held: list[bool],
                     slots: int = 1) -> threading.Thread:
    """A thread that takes one of `slots` turns, says so (and whether it holds one), then waits
    for `leave` (a config block is not seen by other threads: a task passes its graph's)."""
    def body() -> None:
        with prep_gate.turn(slots):
            held.append(prep_gate.holding())
            entered.set()
            leave.wait(10)

    thread = threading.Thread(target=body)
    thread.start()
    return thread


def test_a_second_task_waits_for_the_first_to_give_its_turn_up(monkeypatch):
    monkeypatch.setattr(prep_gate, "WAIT_LIMIT_S", 60.0)  # no going on without a turn, however loaded
    entered, leave, held = threading.Event(), threading.Event(), []
    with lf.config(prep_slots=1):
        with prep_gate.turn():
            assert prep_gate.holding()
            other = _enter_in_thread(entered, leave, held)
            # the other thread cannot get in while this one holds the turn
            assert not entered.wait(0.05)
            prep_gate.release()  # handed off: the other may prepare now
            assert not prep_gate.holding()
            assert entered.wait(10)
        leave.set()
        other.join()
    assert held == [True]


def _another_enters_while_this_one_holds(slots: int) -> list[bool]:
    """Whether a second thread, taking one of `slots` turns while this one holds a turn of them,
    held one once it got in (it always gets in)."""
    entered, leave, held = threading.Event(), threading.Event(), []
    with lf.config(prep_slots=slots), prep_gate.turn():
        assert prep_gate.holding() == bool(slots)
        other = _enter_in_thread(entered, leave, held, slots)
        assert entered.wait(10)
        leave.set()
        other.join()
    return held


def test_two_slots_let_two_tasks_prepare_at_once():
    assert _another_enters_while_this_one_holds(2) == [True]


def test_no_turns_with_prep_slots_0():
    assert _another_enters_while_this_one_holds(0) == [False]


def test_a_turn_held_too_long_delays_the_others_but_never_blocks_them():
    assert _another_enters_while_this_one_holds(1) == [False]  # after WAIT_LIMIT_S it went on


def test_nested_turns_are_one_and_release_is_idempotent():
    with lf.config(prep_slots=1):
        with prep_gate.turn():
            with prep_gate.turn():
                assert prep_gate.holding()
            assert prep_gate.holding()  # the inner turn did not give the outer one up
            prep_gate.release()
            prep_gate.release()
            assert not prep_gate.holding()
        assert prep_gate._semaphore(1).acquire(blocking=False)  # every turn is back
        prep_gate._semaphore(1).release()


def test_a_task_takes_its_turn_once_not_again_inside_it():
    with lf.config(prep_slots=1):
        with prep_gate.turn():
            prep_gate.release()  # say a large copy: the turn went back
            with prep_gate.turn():  # the task goes on inside: no second turn, though one is free
                assert not prep_gate.holding()
        with prep_gate.turn():  # the next task takes one
            assert prep_gate.holding()


def test_a_large_host_copy_gives_the_turn_up_and_a_small_one_keeps_it():
    src = np.random.default_rng(0).integers(0, 255, hostcopy.RELEASE_MIN, dtype=np.uint8)
    dst = np.zeros_like(src)
    with lf.config(prep_slots=1), prep_gate.turn():
        hostcopy.copy(dst[:4096], src[:4096])
        assert prep_gate.holding()
        hostcopy.copy(dst, src)
        assert not prep_gate.holding()
    assert dst.tobytes() == src.tobytes()


def test_a_program_gives_the_turn_up_on_each_backend(backend):
    x = np.random.default_rng(1).standard_normal((64, 8)).astype(np.float32)
    idx = np.random.default_rng(2).permutation(64)
    with lf.config(prep_slots=1), prep_gate.turn():
        got = lf.index_select(lf.from_array(x, chunks=(64, 8)), 0, idx).compute(scheduler="sync")
        assert not prep_gate.holding()  # the CPU program's start, or the Vulkan submit
    assert got.tobytes() == x[idx].tobytes()


@pytest.mark.parametrize("slots", [0, 1, 3])
def test_computes_on_many_threads_are_bit_exact_and_leave_every_turn_back(every_backend, slots):
    rng = np.random.default_rng(slots)
    x = rng.standard_normal((4096, 16)).astype(np.float32)
    chunk = 256
    idx = np.concatenate([s + rng.permutation(chunk) for s in range(0, len(x), chunk)])
    mask = rng.random((len(x), 1)) < 0.5
    out = np.full_like(x, np.nan)  # poisoned
    y = lf.masked_fill(lf.index_select(lf.from_array(x, chunks=(chunk, 16)), 0, idx), mask, -1.0)
    with lf.config(prep_slots=slots, task_bytes=16 << 10):
        y.compute(out=out, scheduler="threads", num_workers=8)
    assert out.tobytes() == np.where(mask, np.float32(-1), x[idx]).tobytes()
    if slots:
        semaphore = prep_gate._semaphore(slots)
        taken = [semaphore.acquire(blocking=False) for _ in range(slots)]
        assert all(taken)
        for _ in taken:
            semaphore.release()


def test_prep_slots_takes_a_count_or_0():
    with pytest.raises(ValueError, match="0 for off"):
        with lf.config(prep_slots="two"):
            pass
    assert lf.config.prep_slots == 1


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.integers(1, 700), cols=st.integers(1, 12), chunk=st.integers(1, 200),
       threads=st.integers(1, 6), slots=st.integers(0, 3), task_kib=st.sampled_from([0, 4, 64]),
       dtype=st.sampled_from([np.float32, np.int16, np.float64]))
def test_any_shape_chunking_threads_and_slots_give_numpy_bits(backend, rows, cols, chunk, threads, slots,
                                                             task_kib, dtype):
    """index_select then masked_fill into a poisoned `out=`, on every backend, with the turns on or
    off, tasks grouped or not: numpy's bits, and every turn given back."""
    rng = np.random.default_rng(rows * 131 + cols)
    x = rng.integers(-1000, 1000, (rows, cols)).astype(dtype)
    idx = rng.integers(0, rows, rows)
    mask = rng.random((rows, 1)) < 0.5
    out = np.full_like(x, 77)  # poisoned
    y = lf.masked_fill(lf.index_select(lf.from_array(x, chunks=(chunk, cols)), 0, idx), mask, -1)
    with lf.config(prep_slots=slots, task_bytes=task_kib << 10):
        y.compute(out=out, scheduler="threads", num_workers=threads)
    assert out.tobytes() == np.where(mask, dtype(-1), x[idx]).tobytes()
    assert not prep_gate.holding()
    if slots:
        semaphore = prep_gate._semaphore(slots)
        taken = [semaphore.acquire(blocking=False) for _ in range(slots)]
        for got in taken:
            if got:
                semaphore.release()
        assert all(taken), "a turn was not given back"
