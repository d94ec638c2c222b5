"""What the op specs share (`ops.common`): rows of 64, ranges cut into pieces, and the chunkings
by rows, by indices and by another axis, whose pieces joined give the whole input back."""

from __future__ import annotations

import numpy as np

from lazyfuel.ops.common import by_indices, by_other_axis, by_rows, rows_of, split


def test_rows_of_64_and_ranges_in_non_empty_pieces() -> None:
    assert rows_of(1000) == (15, 64) and rows_of(10) == (1, 10) and rows_of(64) == (1, 64)
    assert split(10, 3) == [slice(0, 3), slice(3, 6), slice(6, 10)]
    assert split(2, 5) == [slice(0, 1), slice(1, 2)]  # never an empty piece
    assert split(0, 4) == []


def test_by_rows_cuts_every_input_along_axis_0() -> None:
    data, mask = np.arange(12).reshape(6, 2), np.arange(6).reshape(6, 1) % 2 == 0
    parts, axis = by_rows([data, mask], {"value": 1}, 4)
    assert axis == 0 and len(parts) == 4 and all(attrs == {"value": 1} for _, attrs in parts)
    assert np.array_equal(np.concatenate([p[0] for p, _ in parts]), data)
    assert np.array_equal(np.concatenate([p[1] for p, _ in parts]), mask)


def test_by_indices_cuts_the_indices_and_the_mask_after_them_not_the_source() -> None:
    source, idx = np.arange(20).reshape(4, 5), np.array([3, 0, 2, 2, 1])
    mask = np.arange(20).reshape(4, 5) % 3 == 0
    parts, axis = by_indices([source, idx, mask], {"dim": 1}, 2)
    assert axis == 1 and [p[0] is source for p, _ in parts] == [True, True]
    assert np.array_equal(np.concatenate([p[1] for p, _ in parts]), idx)
    assert np.array_equal(np.concatenate([p[2] for p, _ in parts], axis=1), mask)


def test_by_other_axis_cuts_away_from_the_ops_axis_and_keeps_a_1d_input_whole() -> None:
    x = np.arange(24.0).reshape(4, 6)
    parts, axis = by_other_axis("axis", -1)([x], {}, 2)
    assert axis == 0 and np.array_equal(np.concatenate([p[0] for p, _ in parts]), x)
    assert all(np.shares_memory(p[0], x) for p, _ in parts)  # views
    parts, axis = by_other_axis("axis", contiguous=True)([x], {"axis": 0}, 3)
    assert axis == 1 and all(p[0].flags.c_contiguous for p, _ in parts)
    assert np.array_equal(np.concatenate([p[0] for p, _ in parts], axis=1), x)
    one = np.arange(5.0)
    assert by_other_axis("axis", -1)([one], {}, 3) == ([([one], {})], 0)
