"""The task body's input specs (`graph.task_inputs`): hit chunks concatenated and indices remapped; lazy
indices checked, errors naming the global position."""

from __future__ import annotations

import numpy as np
import pytest

from lazyfuel.graph.task import Const, Gathered, LazyIndex, Part


def test_gathered_reads_one_part_as_is_and_shifts_the_indices():
    chunk = np.arange(10.0).reshape(5, 2)[1:]
    spec = Gathered((Part(0),), (4,), 0, Const(np.array([7, 4], np.uint32)))
    data, idx = spec.arrays([chunk])
    assert data is chunk  # as handed in: no copy
    assert idx.dtype == np.uint32 and list(idx) == [3, 0]


def test_gathered_concatenates_only_the_hit_parts_and_remaps():
    parts = [np.full((2, 3), i) for i in range(4)]  # chunks of 2 rows starting at 0, 2, 4, 6
    index = LazyIndex(4, axis_len=8, origin=(0,))
    spec = Gathered(tuple(Part(i) for i in range(4)), (0, 2, 4, 6), 0, index)
    data, idx = spec.arrays([*parts, np.array([7, 0, 6])])
    assert data.shape == (4, 3) and list(data[:, 0]) == [0, 0, 3, 3]  # chunks 0 and 3 only
    assert list(data[idx, 0]) == [3, 0, 3]


def test_lazy_index_errors_name_the_global_position():
    index = LazyIndex(0, axis_len=5, origin=(10,))
    with pytest.raises(IndexError, match="index 9 at position 12 is out of range; expected 0 <= index < 5"):
        index.arrays([np.array([0, 1, 9])])
    index = LazyIndex(0, axis_len=5, origin=(2, 4))
    with pytest.raises(IndexError, match=r"index -1 at position \(3, 4\) is negative"):
        index.arrays([np.array([[0], [-1]])])
    with pytest.raises(TypeError, match="must be integers"):
        index.arrays([np.array([0.5])])
