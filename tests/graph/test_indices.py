"""Concrete indices of a select: checked block by block when built, ranges kept for lowering,
kept as a read-only snapshot in the kernels' index dtype (`graph.indices`)."""

from __future__ import annotations

import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel.graph import chunks as ch
from lazyfuel.graph.fuse import EXACT_HITS, Partition, recipe
from lazyfuel.graph.indices import shifted
from lazyfuel.graph.ir import HASHED_INDEX_BYTES, Gather, IndexSelect
from lazyfuel.graph.task import Const, Gathered

RNG = np.random.default_rng(7)
SRC = RNG.standard_normal((1200, 256)).astype(np.float32)  # blocks of 300 rows: 76800 indices each


def select_node(arr: lf.Array):
    node = arr._node
    assert isinstance(node, (Gather, IndexSelect))
    return node


def test_recorded_ranges_are_each_blocks_min_and_max():
    idx = RNG.integers(0, 1200, (1200, 256))
    node = select_node(lf.gather(lf.from_array(SRC, chunks=(300, 256)), 0, idx))
    chunks = node.index_chunks
    assert node.indices.chunks == chunks and len(node.indices.ranges) == 4
    for b in node.blocks():
        values = idx[ch.block_slices(chunks, b)]
        assert node.indices.block_range(chunks, b) == (values.min(), values.max())
    other = ((600, 600), (256,))  # chunks it was not checked in: computed, the same answer
    assert node.indices.block_range(other, (1, 0)) == (idx[600:].min(), idx[600:].max())


def test_concrete_indices_of_any_size_are_a_read_only_u32_snapshot():
    big = RNG.integers(0, 1200, (1200, 256))
    assert big.nbytes > HASHED_INDEX_BYTES
    x = lf.from_array(SRC, chunks=(300, 256))
    for given in (big, np.array([3, 1], np.int64)):
        kept = select_node(lf.gather(x, 0, given) if given.ndim == 2 else
                           lf.index_select(x, 0, given)).indices.values
        assert kept.dtype == np.uint32 and kept.flags.c_contiguous and not kept.flags.writeable
        assert not np.shares_memory(kept, given) and kept.tolist() == given.tolist()


def test_lowering_reads_the_recorded_hit_range():
    # blocks that read only part of the source: rows 600-899 for block 1, rows 0-299 elsewhere
    idx = RNG.integers(0, 300, (1200, 256))
    idx[300:600] += 600
    node = select_node(lf.gather(lf.from_array(SRC, chunks=(300, 256)), 0, idx))
    partition = Partition.of(node)
    for block, first, count in (((0, 0), 0, 1), ((1, 0), 600, 1)):
        (spec,) = [s for s in recipe(partition, node, block).recipe.inputs if isinstance(s, Gathered)]
        assert spec.part_starts[0] == first and len(spec.parts) == count
        assert isinstance(spec.index, Const) and spec.index.value.size > EXACT_HITS


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.int32, np.uint32, np.int16])
def test_large_gathers_of_any_index_dtype_match_numpy(bits_equal, dtype):
    idx = RNG.integers(0, 300, (1200, 256))
    idx[300:600] += 600  # one block moved into a later chunk: its indices are shifted in the task
    idx = idx.astype(dtype)
    keep = idx.copy()
    got = lf.gather(lf.from_array(SRC, chunks=(300, 256)), 0, idx).compute()
    bits_equal(got, np.take_along_axis(SRC, idx.astype(np.int64), axis=0))
    bits_equal(idx, keep)  # the caller's indices are never written, U32 ones included


def test_non_contiguous_large_indices(bits_equal):
    base = RNG.integers(0, 1200, (512, 1200))
    idx = base.T[:, ::2]  # (1200, 256), strides of a transposed, stepped view
    assert not idx.flags.c_contiguous and idx.nbytes > HASHED_INDEX_BYTES
    got = lf.gather(lf.from_array(SRC, chunks=(300, 256)), 0, idx).compute()
    bits_equal(got, np.take_along_axis(SRC, idx, axis=0))
    rows = base[5, :1000:4]  # a strided 1-d view
    bits_equal(lf.index_select(lf.from_array(SRC, chunks=(300, 256)), 0, rows).compute(), SRC[rows])


def test_a_bad_index_in_a_later_block_raises_when_built_naming_its_position():
    idx = RNG.integers(0, 1200, (1200, 256))
    idx[1000, 17] = 1200
    idx[1100, 3] = -4
    with pytest.raises(IndexError, match=r"^index 1200 at position \(1000, 17\) is out of range; "
                                         r"expected 0 <= index < 1200$"):
        lf.gather(lf.from_array(SRC, chunks=(300, 256)), 0, idx)
    rows = RNG.integers(0, 1200, 200_000).astype(np.int8) % 100
    rows[150_000] = -1
    with pytest.raises(IndexError, match=r"^index -1 at position 150000 is negative"):
        lf.index_select(lf.from_array(SRC, chunks=(300, 256)), 0, rows)


def test_zero_d_and_empty_indices(bits_equal):
    x = lf.from_array(SRC, chunks=(300, 256))
    bits_equal(lf.index_select(x, 0, np.int64(5)).compute(), SRC[[5]])
    bits_equal(lf.index_select(x, 0, np.zeros(0, np.int64)).compute(), SRC[:0])
    bits_equal(lf.gather(lf.from_array(np.float32(3.5)), 0, np.int8(0)).compute(), np.float32(3.5))


def test_shifted_keeps_the_dtype_and_never_writes_its_input():
    wide = np.array([[7, 9], [8, 12]], np.int64)
    got = shifted(wide, 7)
    assert got.dtype == np.int64 and got.flags.c_contiguous and got.tolist() == [[0, 2], [1, 5]]
    mine = np.array([7, 9], np.uint32)
    assert shifted(mine, 0) is mine
    assert shifted(mine, 7).dtype == np.uint32 and shifted(mine, 7).tolist() == [0, 2]
    assert mine.tolist() == [7, 9]
    assert shifted(wide.T, 7).tolist() == [[0, 1], [2, 5]]
