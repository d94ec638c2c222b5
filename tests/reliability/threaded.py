"""Running tasks in many threads under one deadline: a hang fails with each stuck thread's stack.

`run_threads(threads, tasks, task, timeout)` calls `task(k, i)` for i in range(tasks) in thread
k, for every k at once. It returns when all are done and raises AssertionError when a task raised
(which thread, which task, the error) or when threads are still running at the deadline (how many
tasks each thread had done, and where each stuck thread is), so that a deadlock is a clear
failure rather than a CI job that never ends. The deadline is generous on purpose: it catches
hangs, not slowness (speed belongs in benchmarks/).
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections.abc import Callable


def run_threads(threads: int, tasks: int, task: Callable[[int, int], None], timeout: float) -> None:
    """Run `task(k, i)` for i < `tasks` in each of `threads` threads k; see the module docstring."""
    done = [0] * threads
    errors: list[tuple[int, int, BaseException]] = []

    def body(k: int) -> None:
        for i in range(tasks):
            try:
                task(k, i)
            except BaseException as exc:  # reported by the caller's thread, with where it happened
                errors.append((k, i, exc))
                return
            done[k] += 1

    workers = [threading.Thread(target=body, args=(k,), name=f"worker-{k}", daemon=True)
               for k in range(threads)]
    for worker in workers:
        worker.start()
    deadline = time.monotonic() + timeout
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
    stuck = [w for w in workers if w.is_alive()]
    if stuck:
        frames = sys._current_frames()
        stacks = "\n".join(f"{w.name}:\n" + "".join(traceback.format_stack(frames[w.ident]))
                           for w in stuck if w.ident in frames)
        raise AssertionError(f"deadlock or hang: {len(stuck)} of {threads} threads still running after "
                             f"{timeout:.0f} s; tasks done per thread {done} of {tasks}\n{stacks}")
    if errors:
        k, i, exc = errors[0]
        raise AssertionError(f"{len(errors)} thread(s) failed; thread {k}, task {i}: "
                             f"{type(exc).__name__}: {exc}") from exc


def quiet(pool, timeout: float = 60.0) -> None:
    """Wait until `pool` has no batch in flight and its submit count stands still for 0.2 s: work
    an earlier test left running (dask worker threads finishing after their graph raised) must not
    count as this test's."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = pool.submits
        time.sleep(0.2)
        if pool._active == 0 and pool.submits == before:
            return
    raise AssertionError(f"pool {pool.label} still busy after {timeout:.0f} s before the test began")
