"""Concurrency: 8 threads x 500 mixed tasks on one device pool, every result bit-exact, no hang.

Each thread draws tasks of random signatures (index_select, gather, masked_fill, contiguous of
host and in-chain views, fused chains; every dtype), so planning, recording, submitting and
freeing all run concurrently on the one pool. Through the executor every thread runs 500 tasks;
through the lazy API (dask's threaded scheduler, four workers under each of the eight threads)
`LAZYFUEL_LAZY_TASKS` per thread (default 100 in CI; 500 is the full run, about a minute here).
A hang fails after `TIMEOUT` seconds with every stuck thread's stack (`threaded.run_threads`).
"""

from __future__ import annotations

import os

import dask
import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel.backends.vulkan.executor import VulkanExecutor
from lazyfuel.contracts.model import Backend
from lazyfuel.planner import Planner
from lazyfuel.providers import default_registry

from . import mixed
from .soak import poisoned_pool
from .threaded import quiet, run_threads

THREADS = 8
TASKS = 500
LAZY_TASKS = int(os.environ.get("LAZYFUEL_LAZY_TASKS", "100"))
LAZY_BATCH = 25  # tasks computed together by one dask.compute
TIMEOUT = 900.0  # catches a deadlock, not slowness


@pytest.fixture
def pool(vulkan):
    """The process's pool, poisoning every allocation while the test runs."""
    yield from poisoned_pool()


def assert_covered(drawn: list[list[mixed.Task]]) -> None:
    """Every kind and dtype was drawn (so a narrower draw cannot pass unnoticed)."""
    tasks = [t for per_thread in drawn for t in per_thread]
    assert {t.kind for t in tasks} == set(mixed.KINDS)
    assert {t.dtype for t in tasks} == set(mixed.DTYPES)


def test_threads_run_mixed_tasks_through_one_executor(pool):
    executor = VulkanExecutor(pool)
    planner = Planner(default_registry(), [Backend.Vulkan])
    rngs = [np.random.default_rng((8, k)) for k in range(THREADS)]
    drawn: list[list[mixed.Task]] = [[] for _ in range(THREADS)]

    def task(k: int, i: int) -> None:
        one = mixed.draw(rngs[k])
        drawn[k].append(one)
        mixed.check(one, one.run_on(executor, planner))

    quiet(pool)
    submits, in_use = pool.submits, pool.resources()["in_use"]
    run_threads(THREADS, TASKS, task, TIMEOUT)
    assert pool.submits - submits == THREADS * TASKS  # one submit per task, all on this pool
    assert pool.resources()["in_use"] == in_use
    assert_covered(drawn)


def test_threads_compute_lazy_arrays_on_one_pool(pool):
    rngs = [np.random.default_rng((9, k)) for k in range(THREADS)]
    drawn: list[list[mixed.Task]] = [[] for _ in range(THREADS)]

    def task(k: int, i: int) -> None:
        batch = [mixed.draw(rngs[k]) for _ in range(LAZY_BATCH)]
        drawn[k] += batch
        results = dask.compute(*(t.lazy(chunks=3) for t in batch), scheduler="threads", num_workers=4)
        for one, got in zip(batch, results):
            mixed.check(one, got)

    with lf.profile() as profile:
        run_threads(THREADS, max(1, LAZY_TASKS // LAZY_BATCH), task, TIMEOUT)
    assert profile.devices == {pool.label: profile.programs}  # every block ran on this pool
    assert profile.programs >= THREADS * max(1, LAZY_TASKS // LAZY_BATCH) * LAZY_BATCH
    assert_covered(drawn)
