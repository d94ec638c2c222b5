"""`lazyfuel.graph.grouping`: a compute on dask's local schedulers runs adjacent small blocks as one
task (`lazyfuel.config.task_bytes`), the Array's chunks unchanged. Every result is compared bit for
bit with numpy on fresh random data, at many chunkings (uneven last chunks, chunks along axis 1),
with `out=`, page-locked inputs and resident inputs."""

from __future__ import annotations

import dask
import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel.api import DefaultRuntime
from lazyfuel.graph import chunks as ch
from lazyfuel.graph.grouping import coarse_chunks, grouped, local_workers, merge, regrouped
from lazyfuel.graph.ir import Indices
from lazyfuel.graph.lower import lower_into

MIB = 1 << 20


def _w1(rows: int, cols: int, chunks: tuple[int, int], rng: np.random.Generator, x=None):
    """Issue 18's W1 scaled down: masked_fill(index_select(x, 0, idx), mask (N, 1), -1), idx
    permuting the rows inside each row chunk; the Array and its numpy reference."""
    if x is None:
        x = rng.standard_normal((rows, cols), dtype=np.float32)
    step = chunks[0]
    idx = np.concatenate([s + rng.permutation(min(step, rows - s)) for s in range(0, rows, step)])
    mask = rng.random((rows, 1)) < 0.5
    y = lf.masked_fill(lf.index_select(lf.from_array(x, chunks=chunks), 0, idx), mask, -1.0)
    return y, np.where(mask, np.float32(-1), x[idx])


def _tasks(y: lf.Array, workers: int = 2) -> int:
    found = lower_into(y._node, DefaultRuntime.current(), np.empty(y.shape, y.dtype), workers)
    assert found is not None
    return len(found[1])


def test_sixteen_mib_blocks_go_four_to_a_task_the_last_axis_first_and_never_below_two_per_worker():
    rows = (16 * MIB // 4096,) * 256  # 4 GiB of (N, 1024) f32 in 16 MiB chunks
    assert coarse_chunks((rows, (1024,)), 4, 64 * MIB, 32) == (merge(rows, 4), (1024,))
    assert coarse_chunks((rows, (1024,)), 4, 64 * MIB, 128) == (merge(rows, 2), (1024,))  # 128 tasks kept
    assert coarse_chunks((rows, (1024,)), 4, 64 * MIB, 512) == (rows, (1024,))  # fewer blocks than that
    assert coarse_chunks(((16384,) * 8, (1024,)), 4, 64 * MIB, 2) == ((16384,) * 8, (1024,))  # 64 MiB
    # chunks along axis 1 merge there first (whole rows), then along axis 0
    assert coarse_chunks(((8,) * 16, (4,) * 4), 4, 512, 1) == (merge((8,) * 16, 1), (16,))
    assert coarse_chunks(((8,) * 16, (4,) * 4), 4, 2048, 1) == (merge((8,) * 16, 4), (16,))
    assert coarse_chunks(((8,) * 16, (4,) * 4), 4, 256, 1) == ((8,) * 16, (8, 8))  # axis 0 stays
    assert merge((5, 5, 5, 3), 3) == (15, 3)  # an uneven last chunk joins the last group
    nan = ((4, 4), (float("nan"), float("nan")))
    assert coarse_chunks(nan, 4, 1 << 20, 1) is nan  # unknown sizes are left as they are


def test_regrouped_indices_keep_the_snapshot_and_merge_each_blocks_range():
    rng = np.random.default_rng(5)
    values = rng.integers(0, 1000, 103)
    fine = Indices.concrete(values, 1000, (ch.split(103, 10),))
    coarse = regrouped(fine, (merge(ch.split(103, 10), 3),))
    assert coarse.values is fine.values
    for block in coarse.grid.blocks():
        part = values[coarse.grid.slices(block)]
        assert coarse.block_range(coarse.chunks, block) == (part.min(), part.max())


def test_a_w1_compute_runs_a_quarter_of_the_tasks_and_keeps_the_arrays_chunks(backend, bits_equal):
    rng = np.random.default_rng(1)
    y, want = _w1(512, 64, (16, 64), rng)  # 32 blocks of 4 KiB
    with lf.config(task_bytes=16 << 10):
        assert _tasks(y) == 8  # 4 blocks a task
        out = np.full(y.shape, np.nan, np.float32)
        assert y.compute(out=out) is out
    bits_equal(out, want)
    assert y.chunks == ((16,) * 32, (64,)) and y.to_dask().chunks == y.chunks
    assert len(y.to_dask().__dask_keys__()) == 32  # to_dask keeps one task per block
    with lf.config(task_bytes=0):
        assert _tasks(y) == 32
        assert "local schedulers" not in lf.explain(y)
    with lf.config(task_bytes=16 << 10), dask.config.set(num_workers=2):
        assert "runs this node's 32 blocks as 8 task(s) of up to 4 adjacent blocks" in lf.explain(y)
    with lf.config(task_bytes=1 << 20):
        assert _tasks(y) == 4  # two per worker, at the most
        assert _tasks(y, workers=1) == 2


@pytest.mark.parametrize("shape, chunks", [
    ((203, 48), (10, 48)),  # an uneven last chunk
    ((200, 48), (40, 16)),  # chunks along axis 1
    ((203, 50), (7, 13)),  # both, uneven
    ((64, 256), (2, 256)),  # "8 MiB" chunks scaled down: many tiny blocks
])
@pytest.mark.parametrize("scheduler", ["threads", "sync"])
def test_grouped_w1_is_bit_equal_at_many_chunkings(backend, bits_equal, shape, chunks, scheduler):
    rng = np.random.default_rng(abs(hash((shape, chunks))) % 2**32)
    y, want = _w1(*shape, chunks, rng)
    with lf.config(task_bytes=8 << 10):
        assert _tasks(y) < len(y.to_dask().__dask_keys__()) * len(y.chunks[1])
        out = np.full(shape, np.nan, np.float32)
        y.compute(out=out, scheduler=scheduler)
        bits_equal(out, want)
        bits_equal(y.compute(scheduler=scheduler), want)


def test_grouped_views_gathers_and_full_masks_are_bit_equal(backend, bits_equal):
    rng = np.random.default_rng(9)
    a = rng.standard_normal((60, 36)).astype(np.float32)
    mask = rng.random((36, 60)) < 0.3
    idx = rng.integers(0, 60, (36, 45))
    x = lf.from_array(a, chunks=(6, 6))
    cases = [
        (lf.masked_fill(x.T, mask, 7.0), np.where(mask, np.float32(7), a.T)),
        (lf.gather(x.T, 1, idx), np.take_along_axis(a.T, idx, axis=1)),
        (lf.index_select(x, 1, idx[0] % 36).contiguous(), a[:, idx[0] % 36]),
    ]
    with lf.config(task_bytes=4 << 10):
        for y, want in cases:
            assert _tasks(y) < len(list(np.ndindex(*map(len, y.chunks))))
            bits_equal(y.compute(), want)


def test_a_select_regrouped_reads_its_source_in_the_source_chunks():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((64, 8)).astype(np.float32)
    s = lf.index_select(lf.from_array(a, chunks=(4, 8)), 0, rng.permutation(64))
    node = grouped(s._node, 1024, 1)
    assert node.chunks == ((32, 32), (8,)) and node.data.chunks == ((4,) * 16, (8,))
    assert grouped(s._node, 1024, 4).chunks == ((16,) * 4, (8,))  # 8 a task would leave 2 tasks
    assert grouped(s._node, 64, 1) is s._node  # blocks of 128 B are large enough for 64
def test_page_locked_inputs_and_out_are_grouped_and_bit_equal(vulkan, bits_equal):
    rng = np.random.default_rng(4)
    x = lf.empty_pinned((256, 256), np.float32)
    x[:] = rng.standard_normal(x.shape, dtype=np.float32)
    y, want = _w1(256, 256, (8, 256), rng, x=x)
    out = lf.empty_pinned(y.shape, np.float32)
    with lf.config(task_bytes=32 << 10):
        assert _tasks(y) == 8
        y.compute(out=out)
    bits_equal(out, want)


def test_resident_inputs_keep_their_blocks_and_stay_bit_equal(vulkan, bits_equal):
    rng = np.random.default_rng(6)
    a = rng.standard_normal((128, 64), dtype=np.float32)
    held = lf.from_array(a, chunks=(8, 64)).persist(device=True)
    idx, mask = rng.permutation(128), rng.random((128, 1)) < 0.5
    y = lf.masked_fill(lf.index_select(held, 0, idx), mask, -1.0)
    z = lf.masked_fill(held, mask, 2.0)
    with lf.config(task_bytes=16 << 10, device_task_bytes=0):
        assert _tasks(y) == 4  # the select's output is grouped; its source keeps its blocks
        bits_equal(y.compute(), np.where(mask, np.float32(-1), a[idx]))
        # blocks in device memory cannot be cut into other chunks: no grouping
        assert _tasks(z) == 16
        bits_equal(z.compute(), np.where(mask, np.float32(2), a))
    with lf.config(task_bytes=16 << 10):  # not grouped: 8 blocks a task instead (`graph.batched`)
        assert _tasks(y) == _tasks(z) == 2
        bits_equal(y.compute(), np.where(mask, np.float32(-1), a[idx]))
        bits_equal(z.compute(), np.where(mask, np.float32(2), a))


def test_task_bytes_takes_sizes_or_0_and_refuses_fractions():
    with lf.config(task_bytes="16MiB") as cfg:
        assert cfg.task_bytes == 16 << 20
    with lf.config(task_bytes=0) as cfg:
        assert cfg.task_bytes == 0
    with pytest.raises(ValueError, match=r"LAZYFUEL_TASK_BYTES.*size in bytes \(64MiB, 1000000\) or 0"):
        with lf.config(task_bytes="0.5"):
            pass


def test_a_sync_compute_counts_as_one_worker():
    assert local_workers(dask.local.get_sync, {"num_workers": 8}) == 1
    assert local_workers(dask.threaded.get, {"num_workers": 3}) == 3
    with dask.config.set(num_workers=5):
        assert local_workers(dask.threaded.get, {}) == 5


@pytest.mark.parametrize("order", ["C", "F"])
def test_a_grouped_compute_into_an_out_of_any_layout_is_bit_equal(backend, bits_equal, order):
    rng = np.random.default_rng(8)
    y, want = _w1(96, 40, (4, 40), rng)
    out = np.full(y.shape, np.nan, np.float32, order=order)
    with lf.config(task_bytes=2 << 10):
        assert _tasks(y) == 8  # round(2 KiB / 640 B) = 3 blocks a task
        assert y.compute(out=out) is out
    bits_equal(np.ascontiguousarray(out), want)


def test_one_and_three_dim_arrays_group_too(backend, bits_equal):
    rng = np.random.default_rng(10)
    a = rng.integers(-9, 9, 1000).astype(np.int32)
    idx = rng.integers(0, 1000, 700)
    b = rng.standard_normal((12, 10, 8)).astype(np.float32)
    mask = rng.random((12, 10, 8)) < 0.5
    cases = [(lf.index_select(lf.from_array(a, chunks=50), 0, idx), a[idx]),
             (lf.masked_fill(lf.from_array(b, chunks=(2, 5, 4)), mask, 0.5),
              np.where(mask, np.float32(0.5), b))]
    with lf.config(task_bytes=1 << 10):
        for y, want in cases:
            assert _tasks(y) < len(list(np.ndindex(*map(len, y.chunks))))
            bits_equal(y.compute(), want)


def test_a_graph_with_a_dask_source_keeps_its_blocks(backend, bits_equal):
    import dask.array as da

    rng = np.random.default_rng(12)
    a = rng.standard_normal((64, 8)).astype(np.float32)
    mask = rng.random((64, 8)) < 0.5
    y = lf.masked_fill(lf.from_array(a, chunks=(4, 8)), da.from_array(mask, chunks=(4, 8)), 1.0)
    with lf.config(task_bytes=1 << 10):
        assert _tasks(y) == 16  # dask's chunks are not cut into others
        bits_equal(y.compute(), np.where(mask, np.float32(1), a))


@pytest.mark.parametrize("key", [
    (slice(None), slice(3, 40)),
    (slice(5, 190, 3), slice(None)),
    (slice(None, None, -1), slice(None, None, 2)),
    (slice(180, 2, -7), 17),
    (slice(33, 34), slice(None)),
])
def test_slices_of_sources_group_and_stay_bit_equal(backend, bits_equal, key):
    rng = np.random.default_rng(13)
    a = rng.standard_normal((200, 48)).astype(np.float32)
    v = lf.from_array(a, chunks=(8, 12))[key]
    mask = rng.random(v.shape) < 0.5
    y = lf.masked_fill(v, mask, 3.0)
    with lf.config(task_bytes=2 << 10):
        blocks = len(list(np.ndindex(*map(len, y.chunks))))
        assert _tasks(y, workers=1) < blocks
        bits_equal(y.compute(), np.where(mask, np.float32(3), a[key]))


def test_a_pick_from_a_grouped_w1_is_bit_equal(backend, bits_equal):
    rng = np.random.default_rng(14)
    y, want = _w1(256, 32, (8, 32), rng)
    for key in [(slice(7, 250), slice(None, None, 2)), (slice(None, None, -3), slice(4, 20)),
                (slice(None), slice(None))]:
        z = y[key]
        with lf.config(task_bytes=2 << 10):
            assert _tasks(z, workers=1) < len(list(np.ndindex(*map(len, z.chunks))))
            bits_equal(z.compute(), want[key])


def test_a_task_is_sized_by_what_it_reads_not_only_by_what_it_writes(backend, bits_equal):
    rng = np.random.default_rng(15)
    a = rng.standard_normal((4096, 256)).astype(np.float32)
    cols = rng.integers(0, 256, 4)
    y = lf.index_select(lf.from_array(a, chunks=(64, 256)), 1, cols)  # reads 64 KiB, writes 1 KiB a block
    with lf.config(task_bytes=256 << 10):
        assert _tasks(y, workers=1) == 16  # 4 source blocks a task, not 256 result blocks
        bits_equal(y.compute(), a[:, cols])
