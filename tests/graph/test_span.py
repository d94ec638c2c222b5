"""Spanning views: chunks that are views of one buffer, one after the other, seen as one array."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from lazyfuel.graph.span import owner, spanning_view
from lazyfuel.graph.task import Const, Gathered, Part

A = np.arange(8 * 6, dtype=np.float32).reshape(8, 6)


def rows(a: np.ndarray, edges: list[int], axis: int = 0) -> list[np.ndarray]:
    """`a` cut at `edges` along `axis`, as views (what dask's from_array hands tasks)."""
    cut = [slice(None)] * a.ndim
    out = []
    for lo, hi in pairwise(edges):
        cut[axis] = slice(lo, hi)
        out.append(a[tuple(cut)])
    return out


@pytest.mark.parametrize("view, axis, edges", [
    (lambda a: a, 0, [0, 3, 5, 8]),  # row chunks of a C-order array
    (lambda a: a, 1, [0, 2, 6]),  # column chunks: the step is the item size
    (lambda a: a[::-1], 0, [0, 2, 4, 8]),  # a reversed view: negative stride
    (lambda a: a.T, 1, [0, 4, 8]),  # a transposed view
    (lambda a: a[:, ::2], 0, [0, 1, 2, 8]),  # strided columns, one-row parts
    (lambda a: np.asfortranarray(a), 0, [0, 5, 8]),  # Fortran order along axis 0
    (lambda a: np.broadcast_to(a[:1], (8, 6)), 0, [0, 4, 8]),  # stride 0 along the axis
])
def test_consecutive_views_of_one_buffer_span_without_a_copy(view, axis, edges):
    whole = view(A)
    parts = rows(whole, edges, axis)
    span = spanning_view(parts, edges[:-1], axis)
    assert span is not None and np.array_equal(span, whole)
    assert np.shares_memory(span, whole) and not span.flags.writeable
    assert owner(span) is owner(parts[0])


def test_a_small_gap_is_spanned_and_a_large_one_is_not():
    parts = rows(A, [0, 2, 3, 4])
    span = spanning_view([parts[0], parts[2]], [0, 3], 0)  # row 2 lies between: spanned
    assert span is not None and np.array_equal(span, A[0:4])
    parts = rows(A, [0, 1, 7, 8])
    assert spanning_view([parts[0], parts[2]], [0, 7], 0) is None  # 6 rows of gap for 2 held
    assert spanning_view([parts[0], parts[2]], [0, 7], 0, max_gap=6) is not None


@pytest.mark.parametrize("make", [
    lambda: ([A[0:2].copy(), A[2:4].copy()], [0, 2]),  # separate buffers
    lambda: ([A[0:2], A[2:4]], [0, 3]),  # starts that do not match the addresses
    lambda: ([A[2:4], A[0:2]], [0, 2]),  # out of order in memory
    lambda: ([A[0:2], A[2:4, :5]], [0, 2]),  # other extents differ
    lambda: ([A[0:2], A[2:6:2]], [0, 2]),  # strides differ along the axis
    lambda: ([A[0:2, ::2], A[2:4, 1::2]], [0, 2]),  # one buffer, shifted by an element
    lambda: ([A[0:2], A[2:4].view(np.int32)], [0, 2]),  # another dtype
    lambda: ([A[2:2], A[2:2]], [0, 2]),  # only empty parts
])
def test_parts_that_do_not_line_up_give_none(make):
    parts, starts = make()
    assert spanning_view(parts, starts, 0) is None


def test_gathered_hands_the_executor_a_spanning_view_and_shifted_indices():
    parts = rows(A, [0, 2, 4, 6, 8])
    spec = Gathered(tuple(Part(i) for i in range(4)), (0, 2, 4, 6), 0, Const(np.array([5, 2, 4], np.uint32)))
    data, idx = spec.arrays(parts)
    assert np.shares_memory(data, A) and data.shape == (8, 6)  # every part: a view of all of A
    assert idx.dtype == np.uint32 and list(idx) == [5, 2, 4]
    spec = Gathered((Part(1), Part(2)), (2, 4), 0, Const(np.array([5, 2, 4], np.uint32)))
    data, idx = spec.arrays(parts)  # the hit chunks only: rows 2..5
    assert np.shares_memory(data, A) and data.shape == (4, 6) and list(idx) == [3, 0, 2]
    assert np.array_equal(data[idx], A[[5, 2, 4]])
