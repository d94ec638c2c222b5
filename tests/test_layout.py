"""`lazyfuel.layout`: a view's layout read from numpy, the layouts of transposes, basic indices
and broadcasts computed without numpy, each realised over the flat buffer and compared bit for
bit with numpy's view (fresh random data); the five properties contracts test; the bytes a view
touches; errors naming what is wrong."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

from lazyfuel.layout import (
    Layout,
    broadcast_to,
    getitem,
    memory_span,
    normalize_dim,
    row_major_strides,
    transpose,
)

RNG = np.random.default_rng()


def realise(flat: np.ndarray, layout: Layout) -> np.ndarray:
    """The view `layout` describes over the 1-d buffer `flat`."""
    if layout.size == 0:
        return np.empty(layout.shape, flat.dtype)
    item = flat.dtype.itemsize
    return as_strided(flat[layout.offset:], layout.shape, tuple(s * item for s in layout.strides))


def same(got: np.ndarray, want: np.ndarray) -> bool:
    return (got.shape == want.shape
            and np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes())


KEYS = [(slice(None),), (slice(None, None, -1),), (1, slice(2, None, 2)), (slice(3, 0, -2), -1, slice(None)),
        (slice(5, 5),), (-2, slice(None, None, -3), 0), (slice(1, None), slice(None), slice(None, None, -1))]


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_a_basic_index_gives_numpys_view(key):
    base = RNG.standard_normal((5, 6, 4)).astype(np.float32)
    layout = getitem(Layout.contiguous(base.shape), key)
    assert same(realise(base.reshape(-1), layout), base[key])
    view = base[key]
    assert same(realise(memory_span(view).view(np.float32), Layout.of(view)), view)


@pytest.mark.parametrize("axes", [None, (1, 0, 2), (2, 0, 1)])
def test_a_transpose_gives_numpys_view(axes):
    base = RNG.integers(0, 1000, (3, 4, 5)).astype(np.int64)
    layout = transpose(getitem(Layout.contiguous(base.shape), (slice(None, None, -1),)), axes)
    assert same(realise(base.reshape(-1), layout), base[::-1].transpose(axes))


def test_a_broadcast_gives_numpys_view_with_stride_zero():
    base = RNG.standard_normal((3, 1)).astype(np.float64)
    layout = broadcast_to(Layout.contiguous(base.shape), (2, 3, 4))
    assert layout.strides == (0, 1, 0)
    assert same(realise(base.reshape(-1), layout), np.broadcast_to(base, (2, 3, 4)))
    with pytest.raises(ValueError, match=r"^cannot broadcast shape \(3, 1\) to \(2, 4\)$"):
        broadcast_to(Layout.contiguous((3, 1)), (2, 4))
    with pytest.raises(ValueError, match=r"^cannot broadcast shape \(3, 1\) to fewer dims \(3,\)$"):
        broadcast_to(Layout.contiguous((3, 1)), (3,))


def test_the_five_properties_of_typical_views():
    a = np.zeros((4, 6), np.float32)
    cases = {
        "dense": (a, set()),
        "row slice": (a[1:3], set()),  # read from its own first byte: dense
        "column step": (a[:, ::2], {"strided"}),
        "transposed": (a.T, {"strided"}),
        "reversed": (a[::-1], {"reverse_strides", "start_offset"}),  # its first element is the last row
        "broadcast": (np.broadcast_to(a[0], (3, 6)), {"broadcast_stride0"}),
        "reversed rows of columns 1..": (a[::-1, 1:], {"reverse_strides", "start_offset"}),
    }
    for name, (view, awkward) in cases.items():
        props = Layout.of(view).properties()
        assert props["contiguous"] == (not awkward), name
        assert {k for k, v in props.items() if v and k != "contiguous"} == awkward, name
    inside = getitem(Layout.contiguous((4, 6)), (slice(1, 3),))  # rows 1..2 of the whole buffer
    assert {k for k, v in inside.properties().items() if v} == {"start_offset"} and inside.offset == 6


def test_extent_one_dims_and_empty_views_are_not_awkward():
    assert Layout((1, 5), (99, 1)).is_contiguous
    empty = Layout((0, 3), (3, 1), offset=7)
    assert empty.size == 0 and empty.span == 0 and empty.is_contiguous and not empty.has_start_offset
    assert getitem(Layout.contiguous((5, 6)), (slice(1, 3), slice(4, 4))).offset == 0  # empty: no offset


def test_span_counts_elements_from_lowest_to_highest():
    a = np.zeros((4, 6), np.int16)
    assert Layout.of(a[::-1, ::2]).span == 3 * 6 + 4 + 1
    assert Layout.of(np.broadcast_to(a[0, :1], (5, 5))).span == 1
    assert memory_span(a[1:3, 2:4]).nbytes == (6 + 2) * 2
    assert memory_span(a[2:2]).nbytes == 0


def test_the_bytes_a_view_touches_share_its_memory_and_keep_its_write_flag():
    a = RNG.integers(0, 255, (4, 6), dtype=np.uint8)
    span = memory_span(a[::-1, 1:])
    assert np.shares_memory(span, a) and span.flags.writeable
    frozen = a.copy()
    frozen.flags.writeable = False
    assert not memory_span(frozen).flags.writeable


def test_row_major_strides_and_dims_counted_from_the_end():
    assert row_major_strides((2, 3, 4)) == (12, 4, 1) and row_major_strides((2, 0, 3)) == (3, 3, 1)
    assert normalize_dim(-1, 3) == 2 and normalize_dim(np.int64(1), 3) == 1
    assert normalize_dim(0, 0) == 0 == normalize_dim(-1, 0)  # a 0-d array: one element along dim 0
    with pytest.raises(IndexError, match=r"^dim 3 is out of range for an array of 3 dims \(expected -3 <= "):
        normalize_dim(3, 3)
    with pytest.raises(TypeError, match=r"^dim must be an integer, got bool$"):
        normalize_dim(True, 3)


def test_bad_layouts_and_indices_are_refused():
    with pytest.raises(ValueError, match=r"^layout has 2 dims but 1 strides$"):
        Layout((2, 3), (1,))
    with pytest.raises(ValueError, match=r"^negative extent in shape \(2, -1\)$"):
        Layout((2, -1), (1, 1))
    with pytest.raises(IndexError, match=r"^too many indices: 3 for an array of 2 dims$"):
        getitem(Layout.contiguous((2, 3)), (0, 0, 0))
    with pytest.raises(IndexError, match=r"^index -3 is out of bounds for an axis of size 2$"):
        getitem(Layout.contiguous((2, 3)), (-3,))
    with pytest.raises(ValueError, match=r"^axes \(0, 0\) are not a permutation of 0\.\.1$"):
        transpose(Layout.contiguous((2, 3)), (0, 0))
    odd = np.zeros(9, np.uint8)[1:].view(np.int16)  # fine; a byte-strided view is not
    with pytest.raises(ValueError, match=r"are not multiples of the item size 2"):
        Layout.of(as_strided(odd, (2,), (3,)))
