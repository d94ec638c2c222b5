"""Device-resident runs: inputs uploaded once, a recorded batch submitted many times, the
executor's bits and its index errors."""

from __future__ import annotations

import numpy as np
import pytest

from lazyfuel.api import DefaultRuntime
from lazyfuel.backends.vulkan import get_pool
from lazyfuel.backends.vulkan.resident import ResidentBatch, ResidentProgram
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.planner import Chain, OpNode

CHAIN = Chain(3, (OpNode("IndexSelect", (0, 1), (("dim", 0),)),
                  OpNode("MaskedFill", (3, 2), (("value", -2.5),))), (4,))


def plan(a: np.ndarray, idx: np.ndarray, mask: np.ndarray):
    planner = DefaultRuntime("vulkan").planner()
    return planner.plan(CHAIN, [DType.from_numpy(x.dtype) for x in (a, idx, mask)],
                        [Layout.of(x) for x in (a, idx, mask)])


def test_resident_runs_give_the_executors_bits(pool, executor):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((300, 12)).astype(np.float32)
    idx = rng.integers(0, 300, 200).astype(np.uint32)
    mask = rng.integers(0, 2, (200, 12)).astype(bool)
    program = plan(a, idx, mask)
    want = np.where(mask, np.float32(-2.5), a[idx])
    (direct,) = executor.run(program, [a, idx, mask])
    resident = [ResidentProgram(pool, program, [a, idx, mask]) for _ in range(2)]
    try:
        before = pool.submits
        with ResidentBatch(pool, resident, reps=3) as run:
            assert run.dispatches == 2 * 3 * 2
            for done in range(1, 5):
                seconds = run()  # submit to fence, by perf_counter (ns): a real wait is never 0
                assert pool.submits - before == done == run.runs and 0 < seconds < 60
        assert pool.submits - before == 4 and run.runs == 4
        for r in resident:
            (got,) = r.results()
            assert got.tobytes() == direct.tobytes() == want.tobytes()
    finally:
        for r in resident:
            r.free()


def test_resident_bad_index_and_wrong_pool_are_refused(pool, executor):
    a = np.arange(20, dtype=np.float32).reshape(10, 2)
    idx = np.array([1, 12, 3], np.uint32)  # 12 is out of range; never checked on the host here
    mask = np.zeros((3, 2), bool)
    resident = ResidentProgram(pool, plan(a, idx, mask), [a, idx, mask])
    try:
        with ResidentBatch(pool, [resident]) as run:
            run()
        with pytest.raises(IndexError, match="index 12 at position 1"):
            resident.results()
        with pytest.raises(ValueError, match="resident on another pool"):
            ResidentBatch(get_pool(pool.info.index, replica=1), [resident])
    finally:
        resident.free()
