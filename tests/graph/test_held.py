"""`lazyfuel.graph.held`: every host array a graph reads in place, named by the role it plays
(source, indices, mask, data of an op), and the first one an `out=` array would overlap."""

from __future__ import annotations

import dask.array as da
import numpy as np

import lazyfuel as lf
from lazyfuel.graph.held import held_arrays, overlapping

RNG = np.random.default_rng()


def roles(x: lf.Array) -> dict[str, set[int]]:
    """Role -> the base buffers (ids) of the arrays held in it."""
    found: dict[str, set[int]] = {}
    for role, a in held_arrays(x._node):
        base = a
        while base.base is not None and isinstance(base.base, np.ndarray):
            base = base.base
        found.setdefault(role, set()).add(id(base))
    return found


def test_each_array_is_named_by_the_role_it_plays():
    data = RNG.standard_normal((6, 4)).astype(np.float32)
    mask = RNG.random((3, 4)) < 0.5
    x = lf.from_array(data, chunks=(2, 4))
    y = x.T.index_select(1, np.array([5, 0, 2])).T.masked_fill(mask, 0.0)
    found = roles(y)
    assert set(found) == {"the data of index_select", "the indices of index_select",
                          "the mask of masked_fill"}
    assert found["the data of index_select"] == {id(data)}  # through the views and below the select
    assert found["the mask of masked_fill"] == {id(mask)}
    assert roles(x.T[::2]) == {"the source array": {id(data)}}  # views keep the role above them
    assert len(found["the indices of index_select"]) == 1  # lazyfuel's own snapshot of the indices
    assert id(data) not in found["the indices of index_select"]


def test_lazy_indices_and_the_inputs_of_an_op_below_are_named_too():
    data = RNG.standard_normal((8,)).astype(np.float64)
    idx = np.array([7, 1, 1, 0])
    mask = data > 0
    x = lf.from_array(data, chunks=4).masked_fill(mask, 1.0)
    y = x.index_select(0, lf.from_array(idx, chunks=2))
    assert roles(y) == {"the data of masked_fill": {id(data)}, "the mask of masked_fill": {id(mask)},
                        "the indices of index_select": {id(idx)}}  # the select's data is an op's result


def test_a_dask_source_built_by_from_array_is_seen_inside_its_graph():
    data = RNG.standard_normal((4, 4))
    x = lf.asarray(da.from_array(data, chunks=2))
    held = sorted(a.tobytes() for _, a in held_arrays(x._node))  # dask holds the chunks as values
    assert held == sorted(data[i:i + 2, j:j + 2].tobytes() for i in (0, 2) for j in (0, 2))


def test_overlap_is_found_with_the_role_and_none_without():
    data = RNG.standard_normal((6, 4)).astype(np.float32)
    y = lf.from_array(data, chunks=2).index_select(0, [1, 0])
    role, a = overlapping(data[:2], y._node)
    assert role == "the data of index_select" and np.shares_memory(a, data)
    assert overlapping(np.empty((2, 4), np.float32), y._node) is None
    assert overlapping(data[4:].copy(), y._node) is None


def test_interleaved_views_that_share_no_element_do_not_overlap():
    buffer = RNG.standard_normal((8, 4)).astype(np.float32)
    evens, odds = buffer[0::2], buffer[1::2]  # may_share_memory says yes; shares_memory says no
    assert np.may_share_memory(evens, odds)
    y = lf.from_array(evens, chunks=2).index_select(0, [3, 2, 1, 0])
    assert overlapping(odds, y._node) is None
    assert overlapping(buffer[2:4], y._node)[0] == "the data of index_select"
