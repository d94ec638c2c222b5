"""Basic indexing (`graph.slicing`): what may not be indexed is refused with its reason."""

from __future__ import annotations

import numpy as np
import pytest

import lazyfuel as lf

from .small_array import x


def test_basic_indexing_errors():
    with pytest.raises(IndexError, match="too many indices: 3 for an array of 2 dims"):
        x()[0, 0, 0]
    with pytest.raises(IndexError, match="index 5 is out of bounds for an axis of size 5"):
        x()[5]
    with pytest.raises(TypeError, match="use index_select or gather"):
        x()[[0, 1]]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        x()[::0]


def test_a_slice_below_a_fill_over_a_select_pairs_each_data_block_with_its_mask_block():
    # hypothesis found it (test_lower's random pipelines, seed 19): the select's slice kept the
    # select's chunks, the broadcast mask's slice cut the view's, and blocks met mismatched
    a = np.random.default_rng(19).standard_normal((2, 7)).astype(np.float32)
    idx = np.array([0, 1, 2, 6, 0, 1, 5, 3, 4])
    selected = lf.index_select(lf.from_array(a, chunks=(1, 3)), 1, idx)
    for mask in (np.array(True), np.random.default_rng(1).random((1, 9)) < 0.5,
                 np.random.default_rng(2).random((2, 9)) < 0.5):
        want = np.where(mask, np.float32(-1), a[:, idx])[:, ::2]
        got = lf.masked_fill(selected, mask, -1)[:, ::2].compute()
        assert got.tobytes() == want.tobytes() and got.shape == want.shape
