"""The hot path's other forms: prepared items replayed, command buffers run again, timestamps.

Prepared items must record exactly what `kernel.record` records (same results, bit for bit),
replay with no barriers between independent dispatches, and survive being replayed into several
batches; a reusable batch runs again with the same results; a batch not marked reusable refuses
a second run; GPU timestamps rise across recorded work.
"""

from __future__ import annotations

import numpy as np
import pytest
from vulkan_helpers import binding, random_array, same_bits

from lazyfuel.backends.vulkan.kernels import DeviceValue, StatusSlot
from lazyfuel.backends.vulkan.timestamps import Timestamps
from lazyfuel.contracts.model import OpKind
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.planner.program import Step

pytestmark = pytest.mark.usefixtures("memory_mode")


def put(batch, a: np.ndarray) -> DeviceValue:
    alloc = batch.alloc(max(a.nbytes, 1))
    batch.upload(alloc, np.ascontiguousarray(a).reshape(-1).view(np.uint8))
    return DeviceValue(alloc, DType.from_numpy(a.dtype), Layout.contiguous(a.shape))


def steps(rng: np.random.Generator) -> list[tuple[Step, list[np.ndarray], np.ndarray]]:
    """One step of each kernel family with its inputs and the expected output."""
    x = random_array(rng, DType.F32, (6, 33))
    rows = rng.integers(0, 6, 9).astype(np.uint32)
    cols = rng.integers(0, 33, (6, 33)).astype(np.uint32)
    mask = rng.integers(0, 2, (6, 33)).astype(bool)
    fill = np.float32(-2.5).tobytes()
    f32 = DType.F32
    return [
        (Step(binding(OpKind.IndexSelect, f32, DType.U32, f32), (0, 1),
              (("outer_count", 1), ("source_dim_size", 6), ("n_indices", 9), ("inner_count", 33)),
              (9, 33), f32), [x, rows], x[rows]),
        (Step(binding(OpKind.Gather, f32, DType.U32, f32), (0, 1),
              (("source_shape", (6, 33)), ("output_shape", (6, 33)), ("dim", 1)), (6, 33), f32),
         [x, cols], np.take_along_axis(x, cols.astype(np.intp), axis=1)),
        (Step(binding(OpKind.MaskedFill, f32, DType.BOOL, f32), (0, 1), (("fill_bytes", fill),),
              (6, 33), f32),
         [x, mask], np.where(mask, np.float32(-2.5), x)),
        (Step(binding(OpKind.Contiguize, f32, f32), (0,),
              (("shape", (33, 6)), ("strides", (1, 33)), ("offset", 0)), (33, 6), f32), [x], x.T),
        (Step(binding(OpKind.Contiguize, f32, f32), (0,),
              (("shape", (6, 33)), ("strides", (33, 1)), ("offset", 0)), (6, 33), f32), [x], x),
    ]


def test_prepared_items_replayed_match_and_rerun(pool):
    rng = np.random.default_rng(7)
    cases = steps(rng)
    with pool.batch() as batch:
        batch.reusable()
        status = batch.alloc(256 * len(cases))
        batch.fill_u32(status, 0xFFFFFFFF, 256 * len(cases))
        outs, items = [], []
        for i, (step, inputs, expected) in enumerate(cases):
            args = [put(batch, a) for a in inputs]
            out = batch.alloc(expected.nbytes)
            items += batch.prepare(step.binding.kernel_ref.impl, step, args, out, StatusSlot(status, i))
            outs.append((out, np.empty(expected.shape, expected.dtype), expected))
        assert batch.dispatches == 0, "prepare must record nothing"
        batch.replay(items)  # independent steps: no barriers between them
        batch.barrier()  # the second replay writes the same outputs again: order the writes
        batch.replay(items)  # the same items again (same outputs, same values)
        batch.barrier()
        for out, host, _ in outs:
            batch.download(out, host)
        flags = np.empty(64 * len(cases), np.uint32)
        batch.download(status, flags)
        for _ in range(2):
            for _, host, _ in outs:
                host.fill(0)
            batch.run()
            for _, host, expected in outs:
                same_bits(host, np.ascontiguousarray(expected))
            assert (flags == 0xFFFFFFFF).all()


def test_a_batch_runs_once_unless_reusable(pool):
    with pool.batch() as batch:
        batch.run()
        with pytest.raises(RuntimeError, match="runs once"):
            batch.run()
    with pool.batch() as batch:
        batch.alloc(16)
        with pytest.raises(RuntimeError, match="before anything is recorded"):
            batch.reusable()


def test_timestamps_rise_across_recorded_work(pool):
    stamps = Timestamps(pool, 3)
    try:
        x = np.arange(1 << 16, dtype=np.float32)
        step, inputs, expected = steps(np.random.default_rng(1))[2]
        with pool.batch() as batch:
            stamps.reset(batch)
            stamps.write(batch, 0)
            args = [put(batch, a) for a in inputs]
            out = batch.alloc(expected.nbytes)
            step.binding.kernel_ref.impl.record(batch, step, args, out, None)
            stamps.write(batch, 1)
            big = put(batch, x)
            batch.copy(big.allocation, 0, batch.alloc(x.nbytes), 0, x.nbytes)
            stamps.write(batch, 2)
            batch.run()
        t = stamps.read()
        assert stamps.period_ns > 0 and t[0] <= t[1] <= t[2]
        with pytest.raises(IndexError, match=r"outside 0\.\.2"):
            with pool.batch() as batch:
                stamps.write(batch, 3)
    finally:
        stamps.destroy()


def test_executor_fences_only_steps_that_read_earlier_outputs(executor, monkeypatch):
    """Two independent steps share no barrier; the step reading one of them gets one; one more
    closes the program (for staging downloads). Results stay exact."""
    from vulkan_helpers import ProgramBuilder

    from lazyfuel.backends.vulkan.batch import Batch

    calls = []
    original = Batch.barrier
    monkeypatch.setattr(Batch, "barrier", lambda self: (calls.append(1), original(self))[1])
    rng = np.random.default_rng(3)
    x = random_array(rng, DType.F32, (8, 5))
    rows = np.array([7, 0, 3, 3], np.uint32)
    cols = rng.integers(0, 5, (4, 5)).astype(np.uint32)
    pick = np.array([4, 1, 1], np.uint32)
    b = ProgramBuilder(x, rows, cols, pick)
    first = b.index_select(0, x.shape, DType.F32, 0, 1, 4)
    second = b.index_select(0, x.shape, DType.F32, 1, 3, 3)  # independent of `first`
    third = b.gather(first, (4, 5), DType.F32, 1, 2, (4, 5))
    got = executor.run(b.program((first, second, third)), b.inputs)
    assert len(calls) == 2, "one barrier before the gather, one after the last step"
    same_bits(got[0], x[rows])
    same_bits(got[1], np.ascontiguousarray(x[:, pick]))
    same_bits(got[2], np.take_along_axis(x[rows], cols.astype(np.intp), axis=1))
