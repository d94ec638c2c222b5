"""A soak: many mixed tasks on one device pool, with host and device memory measured.

`soak(pool, tasks)` runs `mixed` tasks of a fixed set of signatures from several threads on
`pool`, each result checked bit for bit. A warm-up (every signature at least once, then more
until the allocator's free lists, the plan cache, Python's and the C library's heaps have
settled) comes first; then a `Snapshot` (host RSS and `pool.resources()`), the soak itself, and
a second snapshot. `SoakReport` holds the figures: tasks per second, RSS growth, and the pool's
resources that did not come back (`leaks`; `cached`, the freed allocations kept for reuse, may
grow with the threads' peak and is reported, not compared).

`poisoned_pool()` is the process's pool with every allocation poisoned while a test runs (the
reliability tests' `pool` fixture); `transfer.in_mode(pool, mode, import_min=0)` runs the soak
in the other transfer modes (staged, import, zero-copy, with every array imported).
tests/reliability/test_soak.py asserts on the report; benchmarks/probes/soak.py prints and records it.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import psutil

from lazyfuel.backends.vulkan import get_pool, register
from lazyfuel.backends.vulkan.executor import VulkanExecutor
from lazyfuel.backends.vulkan.pool import DevicePool
from lazyfuel.contracts.model import Backend
from lazyfuel.planner import Planner
from lazyfuel.providers import default_registry

from . import mixed
from .threaded import run_threads

SIGNATURES = 110  # every (kind, dtype) pair twice
UNCOMPARED = ("cached", "idle_contexts")  # reuse caches that may settle later; reported only
POISON = 0xA5  # bytes a kernel forgets to write show up as this pattern


@dataclass(frozen=True)
class Snapshot:
    """Host RSS (bytes) and the pool's `resources()` at one moment, after a garbage collection."""

    rss: int
    resources: dict[str, int]

    @classmethod
    def of(cls, pool: DevicePool) -> Snapshot:
        gc.collect()
        return cls(psutil.Process().memory_info().rss, pool.resources())


@dataclass(frozen=True)
class SoakReport:
    """What a soak measured; `str()` gives the figures on one line."""

    tasks: int
    threads: int
    seconds: float
    start: Snapshot
    end: Snapshot
    validation_messages: int

    @property
    def tasks_per_second(self) -> float:
        return self.tasks / self.seconds

    @property
    def rss_growth(self) -> float:
        """(end - start) / start of the host RSS."""
        return (self.end.rss - self.start.rss) / self.start.rss

    def leaks(self) -> dict[str, tuple[int, int]]:
        """Resources (but `UNCOMPARED`) that differ at the end: name -> (start, end)."""
        a, b = self.start.resources, self.end.resources
        return {k: (a[k], b.get(k, 0)) for k in a if k not in UNCOMPARED and a[k] != b.get(k, 0)}

    def __str__(self) -> str:
        a, b = self.start.resources, self.end.resources
        device = ", ".join(f"{k} {a[k]}->{b.get(k, 0)}" for k in a)
        return (f"{self.tasks} tasks in {self.threads} threads, {self.seconds:.1f} s "
                f"({self.tasks_per_second:.0f} tasks/s); host RSS {self.start.rss / 2**20:.1f} -> "
                f"{self.end.rss / 2**20:.1f} MiB ({100 * self.rss_growth:+.2f} %); pool: {device}; "
                f"validation messages {self.validation_messages}")


def soak(pool: DevicePool, tasks: int, threads: int = 4, warmup: int = 3000, seed: int = 0,
         timeout: float = 1200.0, signatures: int | None = SIGNATURES) -> SoakReport:
    """Run `tasks` mixed tasks (rounded down to a multiple of `threads`) on `pool` after `warmup`
    of them; AssertionError on the first wrong result, failed task or hang (see `run_threads`).
    `signatures=None` draws a new random signature for every task (a plan not cached yet, most
    often): the planner's cache then fills to its size and must stop there."""
    executor = VulkanExecutor(pool)
    planner = Planner(default_registry(), [Backend.Vulkan])
    fixed = mixed.templates(np.random.default_rng(seed), signatures or 0)
    rngs = [np.random.default_rng((seed, k)) for k in range(threads)]

    def task(k: int, i: int) -> None:
        number = i * threads + k  # the warm-up draws every fixed signature once, in order, first
        rng = rngs[k]
        if not fixed:
            one = mixed.draw(rng)
        else:
            one = fixed[number if number < len(fixed) else int(rng.integers(len(fixed)))].draw(rng)
        mixed.check(one, one.run_on(executor, planner))

    run_threads(threads, -(-max(warmup, len(fixed)) // threads), task, timeout)
    messages = len(pool.validation_messages)
    start = Snapshot.of(pool)
    began = time.perf_counter()
    run_threads(threads, tasks // threads, task, timeout)
    seconds = time.perf_counter() - began
    end = Snapshot.of(pool)
    return SoakReport(tasks // threads * threads, threads, seconds, start, end,
                      len(pool.validation_messages) - messages)


def poisoned_pool() -> Iterator[DevicePool]:
    """The process's pool (Vulkan registered), poisoning each allocation until resumed; for a
    fixture: `yield from poisoned_pool()`."""
    register()
    pool = get_pool()
    saved, pool.allocator.poison = pool.allocator.poison, POISON
    try:
        yield pool
    finally:
        pool.allocator.poison = saved
