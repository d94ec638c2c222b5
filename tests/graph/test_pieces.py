"""Per-source-chunk reads: each source chunk of separate buffers is read once in total, pieces go
to the output blocks that need them, and results stay bit-equal to numpy."""

from __future__ import annotations

import threading
import weakref
from collections import Counter
from itertools import pairwise

import dask
import dask.array as da
import numpy as np
import pytest
from dask.core import get_dependencies

import lazyfuel as lf
from lazyfuel.graph.fuse import Partition
from lazyfuel.graph.pieces import plan_pieces

A = np.random.default_rng(7).standard_normal((40, 6)).astype(np.float32)


class Loads:
    """A dask array over `A` whose chunks are separate buffers made by a counting function."""

    def __init__(self, rows: int) -> None:
        self.calls: Counter[int] = Counter()
        self.live = self.most_live = 0
        self._lock = threading.Lock()
        edges = [*range(0, A.shape[0], rows), A.shape[0]]
        self.chunks = (tuple(b - a for a, b in pairwise(edges)), (A.shape[1],))
        self.edges = edges

    def _gone(self) -> None:
        with self._lock:
            self.live -= 1

    def load(self, block_id: tuple[int, int]) -> np.ndarray:
        i = block_id[0]
        chunk = A[self.edges[i]:self.edges[i + 1]].copy()
        with self._lock:
            self.calls[i] += 1
            self.live += 1
            self.most_live = max(self.most_live, self.live)
        weakref.finalize(chunk, self._gone)
        return chunk

    def array(self) -> da.Array:
        return da.map_blocks(self.load, chunks=self.chunks, dtype=A.dtype, meta=np.empty((0, 0), A.dtype))


def test_a_random_index_select_reads_each_source_chunk_once_and_holds_few(backend, bits_equal):
    loads = Loads(4)  # 10 chunks of 4 rows
    idx = np.random.default_rng(0).integers(0, 40, 60)  # output blocks of 4 rows hit several chunks
    y = lf.index_select(lf.asarray(loads.array()), 0, idx)
    assert y._node.name in Partition.of(y._node).pieces
    bits_equal(y.compute(scheduler="sync"), A[idx])
    assert loads.calls == Counter(range(10))  # every chunk once
    assert loads.most_live <= 2  # a chunk is dropped as soon as its read task ends


def test_each_source_chunk_feeds_one_read_task_and_blocks_read_only_pieces():
    loads = Loads(8)
    x = lf.asarray(loads.array())
    y = lf.index_select(x, 0, [39, 0, 17, 1, 9, 38, 8])
    graph = dict(y.to_dask().__dask_graph__())
    source = x.to_dask().name
    readers = {k for k in graph if isinstance(k, tuple) and str(k[0]).startswith("lazyfuel-read-")}
    assert sorted(k[1] for k in readers) == [0, 1, 2, 4]  # the chunks some index hits
    for key in readers:
        assert get_dependencies(graph, key) == {(source, key[1], 0)}
    dependents = Counter(d for k in graph for d in get_dependencies(graph, k))
    assert all(dependents[(source, i, 0)] == 1 for i in (0, 1, 2, 4))
    assert get_dependencies(graph, (y.to_dask().name, 0, 0)) == readers  # one block of 7 rows
    assert np.array_equal(y.compute(), A[[39, 0, 17, 1, 9, 38, 8]])


@pytest.mark.parametrize("dim, shape", [(0, (25, 6)), (1, (40, 9))])
def test_gather_reads_elements_per_source_chunk(backend, bits_equal, dim, shape):
    src = lf.asarray(da.from_array(A, chunks=(7, 4)))  # chunked along both axes
    idx = np.random.default_rng(dim).integers(0, A.shape[dim], shape)
    y = lf.gather(src, dim, idx)
    plan = Partition.of(y._node).pieces[y._node.name]
    assert plan.flat
    bits_equal(y.compute(), np.take_along_axis(A, idx, dim))
    z = lf.masked_fill(y.T, idx.T % 2 == 0, np.float32(-0.0))  # the gather feeds a chain
    bits_equal(z.compute(), np.where(idx.T % 2 == 0, np.float32(-0.0), np.take_along_axis(A, idx, dim).T))


def test_pieces_feed_a_fused_chain_and_computed_sources(backend, bits_equal):
    x = lf.contiguous(lf.from_array(A, chunks=(6, 6))).T  # a computed source, chunked along dim 1
    idx = np.random.default_rng(3).integers(0, 40, 17)
    y = lf.index_select(x, 1, idx).masked_fill(np.arange(17) % 3 == 0, 7.0)
    assert any(p.select.name == y._node.data.name for p in Partition.of(y._node).pieces.values())
    bits_equal(y.compute(), np.where(np.arange(17) % 3 == 0, np.float32(7), A.T[:, idx]))


def test_the_plan_dedups_and_sorts_rows_and_permutes_them_back():
    x = lf.asarray(da.from_array(np.zeros((12, 2), np.float32), chunks=(4, 2)))
    y = lf.index_select(x, 0, [9, 1, 9, 2, 5])  # output blocks of 4 rows: [9, 1, 9, 2] and [5]
    plan = plan_pieces(y._node)
    assert {b: (list(p), b2) for b, (p, b2) in plan.reads.items()} == {
        (0, 0): ([1, 2], (0, 2)), (1, 0): ([1], (0, 1)), (2, 0): ([1], (0, 1))}
    pieces, perm, extent = plan.blocks[(0, 0)]
    assert pieces == (((0, 0), 0), ((2, 0), 0)) and list(perm) == [2, 0, 2, 1] and extent == 3
    assert plan.blocks[(1, 0)][0] == (((1, 0), 0),)


def test_one_buffer_sources_lazy_indices_and_single_hits_stay_gathered():
    idx = [0, 39, 20]
    assert not Partition.of(lf.index_select(lf.from_array(A, chunks=(4, 6)), 0, idx)._node).pieces
    separate = lf.asarray(da.from_array(A, chunks=(4, 6)))
    lazy = lf.index_select(separate, 0, da.from_array(np.array(idx), chunks=2))
    assert not Partition.of(lazy._node).pieces
    sorted_rows = lf.index_select(separate, 0, np.arange(40))  # each block hits one chunk
    assert not Partition.of(sorted_rows._node).pieces
    with dask.config.set(scheduler="sync"):
        assert np.array_equal(lazy.compute(), A[idx]) and np.array_equal(sorted_rows.compute(), A)


def test_explain_names_the_read_tasks_and_the_pieces():
    text = lf.explain(lf.index_select(lf.asarray(da.from_array(A, chunks=(4, 6))), 0, [39, 0, 20]))
    assert "index_select reads each of its 3 source chunk(s) once" in text
    assert "source: 3 piece(s) concatenated along axis 0" in text
