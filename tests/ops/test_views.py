"""The view specs (`ops.views`): a getitem key round-trips through its hashable form, and each view's
layout, numpy view, shape and halving rules agree with numpy."""

from __future__ import annotations

import numpy as np

from lazyfuel.layout import Layout
from lazyfuel.ops.views import VIEW_OPS, VIEWS, decode_key, encode_key


def test_a_getitem_key_round_trips_through_its_hashable_form() -> None:
    key = (2, slice(None, None, -1), slice(1, 7, 3))
    encoded = encode_key(key)
    assert encoded == (2, ("slice", None, None, -1), ("slice", 1, 7, 3))
    hash(encoded)
    assert decode_key(encoded) == key


def test_each_view_gives_numpys_view_shape_and_layout() -> None:
    a = np.arange(4 * 5 * 6, dtype=np.int32).reshape(4, 5, 6)
    attrs = {"transpose": {"axes": (2, 0, 1)},
             "getitem": {"key": encode_key((slice(None, None, -1), 3))},
             "broadcast_to": {"shape": (2, 4, 5, 6)}}
    want = {"transpose": a.transpose(2, 0, 1), "getitem": a[::-1, 3],
            "broadcast_to": np.broadcast_to(a, (2, 4, 5, 6))}
    assert VIEW_OPS == ("transpose", "getitem", "broadcast_to")
    for name, spec in VIEWS.items():
        got = spec.numpy(a, attrs[name])
        assert np.array_equal(got, want[name]) and np.shares_memory(got, a)
        assert spec.shape(attrs[name], [a.shape]) == want[name].shape
        laid = spec.layout(Layout.contiguous(a.shape), attrs[name])
        assert laid.shape == want[name].shape
        assert tuple(s * a.itemsize for s in laid.strides) == want[name].strides


def test_halving_follows_the_axis_a_view_takes_from() -> None:
    shapes = [(4, 5, 6)]
    assert VIEWS["transpose"].cut({"axes": (2, 0, 1)}, 0, shapes) == [2]
    key = {"key": encode_key((slice(None), 3))}  # output axes: source 0 (whole), source 2
    assert VIEWS["getitem"].cut(key, 0, shapes) == [0] and VIEWS["getitem"].cut(key, 1, shapes) == [2]
    assert VIEWS["getitem"].cut({"key": encode_key((slice(1, 3),))}, 0, shapes) is None  # not whole
    assert VIEWS["broadcast_to"].cut({"shape": (2, 4, 5, 6)}, 0, shapes) == [None]  # a new axis
    assert VIEWS["broadcast_to"].cut({"shape": (2, 4, 5, 6)}, 1, shapes) == [0]
