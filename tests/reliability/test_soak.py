"""Soak: 10,000 mixed tasks on one device pool, every result exact, host and device memory flat.

After a warm-up, the host RSS may grow by less than 5 % and the pool's device memory and Vulkan
objects (blocks and bytes reserved, bytes in use, live host imports, recording contexts,
pipelines) must come back to exactly where they were. The pool's default transfer path soaks
for `LAZYFUEL_SOAK_TASKS` tasks (default 10,000); each other transfer mode the device has
(staging buffers, imported host pages, zero-copy with every array imported) for a tenth of that.
benchmarks/probes/soak.py runs the same soak outside pytest and records its figures.
"""

from __future__ import annotations

import os

import pytest

from lazyfuel.backends.vulkan.memtypes import Mode
from lazyfuel.backends.vulkan.transfer import in_mode

from .soak import poisoned_pool, soak

TASKS = int(os.environ.get("LAZYFUEL_SOAK_TASKS", "10000"))


@pytest.fixture
def pool(vulkan):
    """The process's pool, poisoning every allocation while the test runs."""
    yield from poisoned_pool()


def check(report) -> None:
    print(report)  # the figures, for `pytest -s` and the reliability table
    assert not report.leaks(), f"device resources not back to where they were: {report.leaks()}\n{report}"
    assert report.rss_growth < 0.05, f"host memory grew by {100 * report.rss_growth:.1f} %: {report}"


def test_soak_keeps_results_exact_and_memory_flat(pool):
    check(soak(pool, TASKS, warmup=2000))


@pytest.mark.parametrize("mode", [Mode.STAGED, Mode.IMPORT, Mode.ZERO_COPY], ids=lambda m: m.value)
def test_soak_through_each_transfer_mode(pool, mode):
    if mode.imports and pool.allocator.imports is None:
        pytest.skip("the device cannot import host memory")
    imported = []
    with in_mode(pool, mode, import_min=0) as allocator:
        import_host = allocator.import_host

        def counted(data):  # the real import, counted: the soak must really import host pages
            found = import_host(data)
            imported.append(found is not None)
            return found

        allocator.import_host = counted
        report = soak(pool, TASKS // 10, warmup=500)
    check(report)
    if mode.imports:
        assert sum(imported) > TASKS // 10, f"only {sum(imported)} host arrays were imported"
