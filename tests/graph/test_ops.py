"""Building ops: user input is checked when the op is built (concrete) or typed (lazy); shapes
and chunks of the results."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel.graph import ops

A = np.arange(30, dtype=np.float32).reshape(5, 6)


def x() -> lf.Array:
    return lf.from_array(A, chunks=(2, 4))


# --- indices -------------------------------------------------------------------------------------
def test_negative_index_raises_when_built_naming_value_and_position():
    with pytest.raises(IndexError, match=r"index -1 at position 1 is negative; expected 0 <= index < 5 "
                                         r"\(no wrap-around, as in PyTorch\)"):
        lf.index_select(x(), 0, [0, -1])


def test_index_too_large_raises_naming_value_and_position():
    with pytest.raises(IndexError, match=r"index 6 at position 2 is out of range; expected 0 <= index < 6"):
        lf.index_select(x(), -1, np.array([0, 1, 6], np.uint8))
    with pytest.raises(IndexError, match=r"index 5 at position \(1, 0\) is out of range"):
        lf.gather(x(), 0, np.array([[0] * 6, [5] + [0] * 5]))


@pytest.mark.parametrize("bad", [np.array([0.0, 1.0]), np.array([True, False])])
def test_float_and_bool_indices_are_refused(bad):
    with pytest.raises(TypeError, match=rf"index values must be integers \(got dtype {bad.dtype}\)"):
        lf.index_select(x(), 0, bad)
    with pytest.raises(TypeError, match="must be integers"):
        lf.index_select(x(), 0, da.from_array(bad))  # lazy: the dtype is known when built


def test_two_d_indices_for_index_select_are_a_value_error():
    with pytest.raises(ValueError, match=r"index_select takes 1-d indices, got shape \(2, 1\)"):
        lf.index_select(x(), 0, [[0], [1]])


def test_dim_out_of_range():
    with pytest.raises(IndexError, match=r"dim 2 is out of range for an array of 2 dims"):
        lf.index_select(x(), 2, [0])
    with pytest.raises(TypeError, match="dim must be an integer"):
        lf.gather(x(), 0.5, [[0]])


def test_gather_index_shape_must_fit():
    with pytest.raises(ValueError, match=r"gather index has shape \(2, 5\), expected \(any, 6\)"):
        lf.gather(x(), 0, np.zeros((2, 5), int))
    with pytest.raises(ValueError, match="gather index has 1 dims but the source has 2"):
        lf.gather(x(), 1, da.zeros(3, dtype=int))


def test_zero_d_index_select_takes_exactly_one_index():
    with pytest.raises(ValueError, match="index_select on a 0-d array takes exactly one index, got 2"):
        lf.index_select(np.float32(1), 0, [0, 0])
    with pytest.raises(IndexError, match="index 1 at position 0 is out of range; expected 0 <= index < 1"):
        lf.index_select(np.float32(1), 0, [1])


# --- masks and values ----------------------------------------------------------------------------
def test_uint8_mask_is_refused_not_reinterpreted():
    msg = r"mask must be bool \(got uint8\); a uint8 mask is not reinterpreted: pass mask.astype\(bool\)"
    with pytest.raises(TypeError, match=msg):
        lf.masked_fill(x(), np.ones(6, np.uint8), 0)
    with pytest.raises(TypeError, match=msg):
        lf.masked_fill(x(), da.ones(6, dtype=np.uint8, chunks=3), 0)


def test_mask_must_broadcast_with_the_data():
    msg = (r"mask of shape \(5,\) and data of shape \(5, 6\) do not broadcast together: dim -1 has 5 "
           r"elements in the mask and 6 in the data \(expected equal extents, or 1 in either\)")
    with pytest.raises(ValueError, match=msg):
        lf.masked_fill(x(), np.ones(5, bool), 0)
    with pytest.raises(ValueError, match=r"mask of shape \(3, 4, 6\) and data of shape \(5, 6\) do not "
                                         r"broadcast together: dim -2 has 4 elements in the mask and 5"):
        lf.masked_fill(x(), da.ones((3, 4, 6), dtype=bool), 0)  # lazy: checked at the call all the same


def test_a_larger_mask_stretches_the_data_up_lazily():
    """Issue 15: mask (2, 1) over data (25,) gives (2, 25), as np.where and torch do; nothing runs."""
    y = lf.masked_fill(np.arange(25.0), np.array([[True], [False]]), -1)
    assert (y.shape, y.chunks) == ((2, 25), ((2,), (25,)))
    lazy = da.from_array(np.ones((6, 1, 6), bool), chunks=(2, 1, 3))
    y = lf.masked_fill(x(), lazy, 0)  # data (5, 6) in (2, 2, 1) x (4, 2) chunks
    assert y.shape == (6, 5, 6)
    assert y.chunks == ((2, 2, 2), (2, 2, 1), (4, 2))  # new dim: the mask's chunks; the rest: the data's


def test_fill_value_must_fit_the_dtype():
    with pytest.raises(ValueError, match="out of range for U8"):
        lf.masked_fill(np.zeros(3, np.uint8), np.ones(3, bool), 300)
    with pytest.raises(TypeError, match="fill value must be"):
        lf.masked_fill(x(), np.ones(6, bool), "zero")


def test_a_fraction_into_integers_is_refused_as_300_into_uint8_is():
    """Issue 15: masked_fill(int32 array, 1.5) filled 1 silently; the one rule refuses it."""
    with pytest.raises(ValueError, match=r"fill value 1.5 is not a whole number, so I32 cannot hold it"):
        lf.masked_fill(np.zeros(3, np.int32), np.ones(3, bool), 1.5)
    with pytest.raises(ValueError, match=r"fill value 2 is not a truth value, so BOOL cannot hold it"):
        lf.masked_fill(np.zeros(3, bool), np.ones(3, bool), 2)
    assert lf.masked_fill(np.zeros(3, np.int32), np.ones(3, bool), 2.0).compute().tolist() == [2, 2, 2]


# --- views ---------------------------------------------------------------------------------------
def test_basic_indexing_errors():
    with pytest.raises(IndexError, match="too many indices: 3 for an array of 2 dims"):
        x()[0, 0, 0]
    with pytest.raises(IndexError, match="index 5 is out of bounds for an axis of size 5"):
        x()[5]
    with pytest.raises(TypeError, match="use index_select or gather"):
        x()[[0, 1]]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        x()[::0]


def test_broadcast_and_transpose_errors():
    with pytest.raises(ValueError, match=r"cannot broadcast shape \(5, 6\) to \(4, 6\)"):
        lf.broadcast_to(x(), (4, 6))
    with pytest.raises(ValueError, match=r"axes \(0, 0\) are not a permutation"):
        lf.transpose(x(), (0, 0))


def test_unsupported_dtype_is_refused():
    with pytest.raises(TypeError, match=r"unsupported numpy dtype timedelta64\[s\]"):
        lf.from_array(np.zeros(3, "m8[s]"))


# --- shapes and chunks ---------------------------------------------------------------------------
def test_views_keep_chunks_aligned_with_the_source():
    y = x()
    assert y.T.chunks == ((4, 2), (2, 2, 1))
    assert y[::-1].chunks == ((1, 2, 2), (4, 2))
    assert y[1::2, 5].chunks == ((1, 1),)
    assert y[..., ::3].shape == (5, 2)
    assert lf.broadcast_to(y, (3, 5, 6)).chunks == ((3,), (2, 2, 1), (4, 2))


def test_select_output_chunks():
    y = x()
    assert lf.index_select(y, 1, np.arange(9) % 6).chunks == ((2, 2, 1), (4, 4, 1))
    lazy = da.from_array(np.arange(9) % 6, chunks=5)
    assert lf.index_select(y, 1, lazy).chunks == ((2, 2, 1), (5, 4))
    assert lf.gather(y, 0, np.zeros((7, 6), int)).chunks == ((2, 2, 2, 1), (4, 2))
    assert lf.gather(y, 0, da.zeros((7, 6), dtype=int, chunks=3)).chunks == ((3, 3, 1), (4, 2))


def test_same_ops_give_the_same_name():
    idx = np.array([4, 0])
    assert lf.index_select(x(), 0, idx).name == lf.index_select(x(), 0, idx.copy()).name
    assert lf.index_select(x(), 0, idx).name != lf.index_select(x(), 0, idx[::-1]).name


def test_lazy_inputs_are_recognised():
    assert ops.is_lazy(da.zeros(3)) and ops.is_lazy(lf.asarray(A)._node)
    assert not ops.is_lazy(A) and not ops.is_lazy([1, 2])


def test_numpy_sources_are_views_of_the_array_not_copies():
    a = np.arange(24, dtype=np.float32).reshape(6, 4)
    y = lf.from_array(a, chunks=(2, 4))
    assert y._node.one_buffer
    graph = dict(y.to_dask().__dask_graph__())
    assert len(graph) == 3 and all(np.shares_memory(c, a) for c in graph.values())
    assert lf.from_array(a, chunks=(2, 4)).name == y.name != lf.from_array(a.copy(), chunks=(2, 4)).name
    a[0, 0] = -1.0  # the data is not copied: the lazy array sees it
    assert y.compute()[0, 0] == -1.0
    assert not lf.from_array(da.from_array(a, chunks=2))._node.one_buffer


def test_large_concrete_indices_are_named_without_hashing_their_bytes(monkeypatch):
    from lazyfuel.graph import indices

    monkeypatch.setattr(indices, "HASHED_INDEX_BYTES", 16)
    idx = np.arange(30) % 5
    first = lf.index_select(x(), 0, idx)
    assert first.name == first.name and first.name != lf.index_select(x(), 0, idx).name  # by identity
    assert np.array_equal(first.compute(), A[idx])
