"""Work on several threads released together, timed: the harness of benchmarks/multi_gpu.py and
benchmarks/probes/link.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


def threaded(count: int, work: Callable[[int], None]) -> float:
    """Wall seconds for `count` threads each running `work(i)`, released together by a barrier
    (the clock starts when they are); the first error a thread raised is raised again after all
    have ended."""
    barrier = threading.Barrier(count + 1)
    errors: list[BaseException] = []

    def body(i: int) -> None:
        barrier.wait()
        try:
            work(i)
        except BaseException as err:
            errors.append(err)

    pool = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for t in pool:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in pool:
        t.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - start
