"""Chunk arithmetic: slices split over chunks, positions located, indices grouped by chunk."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyfuel.graph import chunks as ch


@st.composite
def chunked_axis(draw: st.DrawFn) -> tuple[int, ...]:
    sizes = draw(st.lists(st.integers(0, 5), min_size=1, max_size=5))
    return tuple(sizes)


@settings(max_examples=200, deadline=None)
@given(chunked_axis(), st.integers(-8, 8) | st.none(), st.integers(-8, 8) | st.none(),
       st.sampled_from([1, 2, 3, -1, -2, -3, 7]))
def test_slice_pieces_view_the_same_elements_as_the_slice(axis, start, stop, step):
    n = sum(axis)
    positions = np.arange(n)
    blocks = np.split(positions, np.cumsum(axis)[:-1])
    norm = slice(start, stop, step).indices(n)
    pieces = ch.slice_pieces(axis, *norm)
    got = np.concatenate([blocks[p.block][p.local] for p in pieces])
    assert np.array_equal(got, positions[slice(start, stop, step)])
    if len(got):
        assert all(len(blocks[p.block][p.local]) > 0 for p in pieces)  # no empty output chunk


@settings(max_examples=100, deadline=None)
@given(chunked_axis(), st.data())
def test_locate_and_chunk_ids_agree_with_the_chunk_bounds(axis, data):
    n = sum(axis)
    if n == 0:
        return
    pos = data.draw(st.integers(0, n - 1))
    block, local = ch.locate(axis, pos)
    assert ch.starts(axis)[block] + local == pos and 0 <= local < axis[block]
    assert ch.chunk_ids(np.array([pos]), axis)[0] == block


def test_hits_are_the_sorted_chunks_touched():
    assert ch.hits(np.array([9, 0, 1, 9], np.uint32), (4, 4, 2)) == (0, 2)
    assert ch.hits(np.array([], np.uint32), (4,)) == ()
    assert ch.hits(np.array([0, 4]), (0, 4, 0, 2)) == (1, 3)


def test_split_and_block_geometry():
    assert ch.split(10, 4) == (4, 4, 2)
    assert ch.split(0, 4) == (0,)
    assert ch.split(3, 8) == (3,)
    assert ch.block_slices(((2, 3), (4,)), (1, 0)) == (slice(2, 5), slice(0, 4))
    assert ch.block_shape(((2, 3), (4,)), (1, 0)) == (3, 4)


def test_regular_chunks_take_a_division_that_agrees_with_the_search():
    values = np.random.default_rng(0).integers(0, 1000, 500).astype(np.uint32)
    for axis in [(100,) * 10, (128,) * 7 + (104,), (1000,), (400, 400, 200)]:
        got = ch.chunk_ids(values, axis)
        want = np.searchsorted(np.asarray(ch.starts(axis)), values, side="right") - 1
        assert got.dtype == np.int64 and np.array_equal(got, want)


def test_the_hit_range_runs_from_the_lowest_hit_to_the_highest():
    assert ch.hit_range((0, 9), (4, 4, 2)) == (0, 1, 2)
    assert ch.hit_range((5, 6), (4, 4, 2)) == (1,)
    assert ch.hit_range((3, 3), (4, 0, 4, 2)) == (0,)
    assert ch.hit_range((4, 8), (4, 0, 4, 2)) == (2, 3)  # the empty chunk holds no value
    assert ch.hit_range(None, (4,)) == ()
