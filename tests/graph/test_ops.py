"""The graph's op builders (`graph.ops`) as one: dims checked, and the same op on the same input gets
the same name. Each builder's own checks are tested beside its module (test_select_ops,
test_fill_ops, test_slicing, test_layout_ops, test_view_nodes, test_sources)."""

from __future__ import annotations

import numpy as np
import pytest

import lazyfuel as lf

from .small_array import A, x

# --- dims and names ---------------------------------------------------------------------------------


def test_dim_out_of_range():
    with pytest.raises(IndexError, match=r"dim 2 is out of range for an array of 2 dims"):
        lf.index_select(x(), 2, [0])
    with pytest.raises(TypeError, match="dim must be an integer"):
        lf.gather(x(), 0.5, [[0]])


def test_same_ops_give_the_same_name():
    idx = np.array([4, 0])
    assert lf.index_select(x(), 0, idx).name == lf.index_select(x(), 0, idx.copy()).name
    assert lf.index_select(x(), 0, idx).name != lf.index_select(x(), 0, idx[::-1]).name


def test_large_concrete_indices_are_named_without_hashing_their_bytes(monkeypatch):
    from lazyfuel.graph import indices

    monkeypatch.setattr(indices, "HASHED_INDEX_BYTES", 16)
    idx = np.arange(30) % 5
    first = lf.index_select(x(), 0, idx)
    assert first.name == first.name and first.name != lf.index_select(x(), 0, idx).name  # by identity
    assert np.array_equal(first.compute(), A[idx])
