"""The fusion pass: what runs together, what each task reads, and what it hands the executor."""

from __future__ import annotations

import dask.array as da
import numpy as np
from dask.core import get_dependencies

import lazyfuel as lf
from lazyfuel.graph.fuse import Partition, recipe
from lazyfuel.graph.task import Gathered, LazyIndex

A = np.arange(96, dtype=np.float32).reshape(8, 12)


def lazyfuel_tasks(arr: lf.Array) -> dict:
    graph = dict(arr.to_dask().__dask_graph__())
    return {k: v for k, v in graph.items() if isinstance(k, tuple) and str(k[0]).startswith("lazyfuel-")}


def test_transpose_select_fill_on_one_block_is_one_task_with_one_chain(bits_equal):
    x = lf.from_array(A, chunks=A.shape)
    mask = np.arange(12) % 2 == 0
    y = x.T.index_select(0, [3, 1, 4]).masked_fill(mask[None, :8].repeat(3, 0), 0.0)
    tasks = lazyfuel_tasks(y)
    assert len(tasks) == 1
    task = recipe(Partition.of(y._node), y._node, (0, 0))
    assert [n.op for n in task.recipe.chain.nodes] == ["IndexSelect", "MaskedFill"]
    source = task.recipe.inputs[0]
    assert isinstance(source, Gathered) and source.parts[0].views[0][0] == "transpose"
    bits_equal(y.compute(), np.where(mask[None, :8], np.float32(0), A.T[[3, 1, 4]]))


def test_each_output_block_reads_only_the_chunks_its_indices_hit():
    x = lf.from_array(A, chunks=(2, 12))  # 4 chunks along dim 0
    y = lf.index_select(x, 0, [0, 1, 7, 6, 2, 3, 2])  # output chunks of 2: {0,3}, {3}, {1}, {1}
    graph = dict(y.to_dask().__dask_graph__())
    name = y.to_dask().name
    source = x.to_dask().name
    read = [sorted(k[1] for k in get_dependencies(graph, (name, b, 0))) for b in range(4)]
    assert read == [[0], [3], [1], [1]]
    assert all(k[0] == source for b in range(4) for k in get_dependencies(graph, (name, b, 0)))
    z = lf.index_select(x, 0, [0, 7])
    assert sorted(k[1] for k in get_dependencies(dict(z.to_dask().__dask_graph__()),
                                                 (z.to_dask().name, 0, 0))) == [0, 3]


def test_lazy_indices_read_every_chunk_along_the_axis_and_are_checked_in_the_task():
    x = lf.from_array(A, chunks=(3, 5))
    y = lf.index_select(x, 0, da.from_array(np.array([7, 0, 2]), chunks=2))
    task = recipe(Partition.of(y._node), y._node, (0, 1))
    spec = task.recipe.inputs[0]
    assert isinstance(spec, Gathered) and isinstance(spec.index, LazyIndex)
    assert len(spec.parts) == 3  # every chunk along dim 0 (3 + 3 + 2)
    assert np.array_equal(y.compute(), A[[7, 0, 2]])


def test_views_of_source_chunks_reach_the_executor_as_numpy_views():
    x = lf.from_array(A, chunks=(4, 6))
    y = lf.masked_fill(x[::-1, 1::2].T, np.ones((1, 8), bool), 1.0)
    task = recipe(Partition.of(y._node), y._node, (0, 0))
    (data, mask) = task.recipe.inputs
    assert [op for op, _ in data.views] == ["getitem", "transpose"]
    assert [op for op, _ in mask.views] == ["broadcast_to"]
    _, layouts = task.recipe.signature(task.metas)
    assert layouts[0].has_reverse_strides and layouts[1].has_broadcast_stride0


def test_views_on_top_of_the_result_are_applied_to_it():
    x = lf.from_array(A, chunks=(4, 6))
    y = lf.contiguous(x)[::-1].T
    task = recipe(Partition.of(y._node), y._node, (0, 0))
    assert [n.op for n in task.recipe.chain.nodes] == ["Contiguize"]
    assert [op for op, _ in task.recipe.post] == ["getitem", "transpose"]
    assert np.array_equal(y.compute(), A[::-1].T)


def test_a_shared_op_runs_once_as_its_own_group(bits_equal):
    b = lf.contiguous(np.array([True, False, True, True]))
    y = lf.masked_fill(b, b, False)
    assert b._node.name in Partition.of(y._node).separate
    bits_equal(y.compute(), np.zeros(4, bool))


def test_a_computed_source_chunked_along_dim_is_lowered_before_the_select(bits_equal):
    x = lf.from_array(A, chunks=(3, 12))
    c = lf.contiguous(x)
    y = lf.index_select(c.T, 1, [7, 0])
    assert c._node.name in Partition.of(y._node).separate
    single = lf.index_select(lf.contiguous(lf.from_array(A, chunks=(8, 4))), 0, [7, 0])
    assert not Partition.of(single._node).separate  # one chunk along dim: fused
    bits_equal(y.compute(), A.T[:, [7, 0]])
    bits_equal(single.compute(), A[[7, 0]])


def test_pure_views_run_no_kernel(bits_equal):
    y = lf.from_array(A, chunks=5)[::-2].T
    task = recipe(Partition.of(y._node), y._node, (0, 0))
    assert task.recipe.chain is None
    bits_equal(y.compute(), A[::-2].T)


def test_large_index_blocks_over_one_buffer_read_the_range_between_their_hits(monkeypatch):
    from lazyfuel.graph import fuse

    monkeypatch.setattr(fuse, "EXACT_HITS", 1)
    x = lf.from_array(A, chunks=(2, 12))  # 4 chunks along dim 0, views of one buffer
    y = lf.index_select(x, 0, [0, 7, 6])  # output blocks of 2: [0, 7] hits chunks 0 and 3
    graph = dict(y.to_dask().__dask_graph__())
    deps = get_dependencies(graph, (y.to_dask().name, 0, 0))
    assert sorted(k[1] for k in deps) == [0, 1, 2, 3]  # the range: views, free to pass
    assert np.array_equal(y.compute(), A[[0, 7, 6]])
    separate = lf.index_select(lf.asarray(da.from_array(A, chunks=(2, 12))), 0, [0, 7, 6, 7, 0, 6])
    assert separate._node.name in Partition.of(separate._node).pieces  # separate buffers: pieces
