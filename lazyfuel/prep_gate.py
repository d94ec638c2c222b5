"""Tasks take turns at their Python: the first tasks of a compute submit after their own
preparation, not after every thread's.

A compute on dask's threaded scheduler starts a task on every worker thread at once. Each task's
Python (its inputs, plan and recording: about a millisecond on the H200's host) runs under the
GIL, and the Vulkan calls it makes through cffi release and take the GIL back hundreds of times,
so 16 threads starting together advance in turns at a sixteenth of their speed: the first
submit came 13-16 ms into a 100 ms compute of W1, with the device idle all that time
(benchmarks/probes/w1_timeline.py). `turn()` lets at most `config.prep_slots` tasks prepare at
once; a task gives its turn up (`release()`) as soon as its work is handed off or it goes on to
work that does not hold the GIL: its first submit (`Batch.start`), a fence wait, a large host
copy or row gather (those run on several threads), an import of pageable pages, a program on the
CPU backend. The work itself runs as before on every thread; only the order of the Python
changes: the first task submits after ~1 ms, the next ~1 ms later, while the device works.

A thread waits at most `WAIT_LIMIT_S` for its turn and then goes on without one, so work that
keeps a turn long (a step nobody releases for) costs the others that wait, never a deadlock.
`config.prep_slots` 0 turns the gate off. Turns are per process (a forked child makes its own).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from lazyfuel.settings import config

WAIT_LIMIT_S = 0.05  # the longest a task waits for its turn before it goes on without one

_held = threading.local()  # .semaphore: the one this thread holds a turn of (None: none);
#                            .inside: whether the thread is in a `turn()` body
_lock = threading.Lock()
_semaphores: dict[tuple[int, int], threading.Semaphore] = {}  # (pid, slots) -> its turns


def _semaphore(slots: int) -> threading.Semaphore:
    key = (os.getpid(), slots)
    with _lock:
        found = _semaphores.get(key)
        if found is None:
            found = _semaphores[key] = threading.Semaphore(slots)
        return found


@contextmanager
def turn(slots: int | None = None) -> Iterator[None]:
    """Run the body as a task's preparation: with one of `slots` turns (default
    `config.prep_slots`; a task passes its graph's, `Runtime.overrides` being applied only later in
    it), waiting for one at most `WAIT_LIMIT_S`, given up at the latest when the body ends. A turn
    inside another on one thread is part of it: it takes none, even where the outer one was given
    up or never got one (a task waits for its turn once); with 0 slots nothing waits."""
    if getattr(_held, "inside", False):
        yield
        return
    _held.inside = True
    try:
        slots = config.prep_slots if slots is None else slots
        if slots:
            semaphore = _semaphore(slots)
            _held.semaphore = semaphore if semaphore.acquire(timeout=WAIT_LIMIT_S) else None
        yield
    finally:
        release()
        _held.inside = False


def release() -> None:
    """Give up the calling thread's turn, if it holds one (its work is handed off, or what
    follows does not need the GIL)."""
    semaphore = getattr(_held, "semaphore", None)
    if semaphore is not None:
        _held.semaphore = None
        semaphore.release()


def holding() -> bool:
    """Whether the calling thread holds a turn."""
    return getattr(_held, "semaphore", None) is not None
