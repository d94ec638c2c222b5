"""Indices have one meaning (issue 16 item 7): concrete indices are the values they held when the
op was built, whatever the caller does to its array afterwards, at any size, on every backend;
and an error names the right axis length and the value as the caller gave it."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel.graph.ir import HASHED_INDEX_BYTES
from lazyfuel.providers import available_backends

BACKENDS = [b.name.lower() for b in available_backends() if b.name in ("Cpu", "Vulkan")]
AXIS = 400_000


@pytest.fixture(params=BACKENDS)
def backend(request, monkeypatch):
    monkeypatch.setenv("LAZYFUEL_BACKEND", request.param)
    return request.param


@pytest.mark.parametrize("n", [1000, 300_000], ids=["below-1MiB", "above-1MiB"])
def test_a_change_after_the_op_is_built_changes_nothing(backend, n):
    rng = np.random.default_rng(n)
    src = rng.standard_normal(AXIS).astype(np.float32)
    x = lf.from_array(src, chunks=100_000)
    idx = rng.integers(0, 100_000, n)  # every index in the first chunk
    assert (idx.nbytes > HASHED_INDEX_BYTES) == (n > 1000)
    y = lf.index_select(x, 0, idx)
    want = src[idx]
    idx[0] = AXIS - 1  # valid, but in another chunk than the op planned for
    idx[1] = -1
    idx[2] = 2**40
    got = y.compute()
    assert got.tobytes() == want.tobytes()


def test_a_change_between_lowering_and_compute_changes_nothing(backend):
    rng = np.random.default_rng(3)
    src = rng.standard_normal((AXIS // 100, 4)).astype(np.float32)
    idx = rng.integers(0, AXIS // 100, (300_000, 4))
    y = lf.gather(lf.from_array(src, chunks=(1000, 4)), 0, idx)
    want = np.take_along_axis(src, idx, axis=0)
    lowered = y.to_dask()  # the graph exists; nothing has run
    idx[:] = -1
    assert lowered.compute().tobytes() == want.tobytes()


def test_the_snapshot_cannot_be_written_through_the_graph():
    idx = np.arange(10)
    y = lf.index_select(lf.from_array(np.arange(10.0)), 0, idx)
    held = y._node.indices.values
    assert not held.flags.writeable and not np.shares_memory(held, idx)
    with pytest.raises(ValueError):
        held[0] = 3


def test_errors_name_the_axis_and_the_value_as_given(backend):
    """Out-of-range values are reported against the whole axis (not a chunk of it), as given
    (-1, not 4294967295), for concrete and lazy indices alike."""
    x = lf.from_array(np.zeros(AXIS, np.float32), chunks=100_000)
    for bad, words in ((-1, "is negative"), (AXIS, "is out of range")):
        idx = np.array([5, 399_999, bad], np.int64)
        with pytest.raises(IndexError, match=rf"^index {bad} at position 2 {words}; "
                                             rf"expected 0 <= index < {AXIS}\b"):
            lf.index_select(x, 0, idx)
        lazy = da.from_array(np.array([5, 399_999, 7, bad], np.int64), chunks=2)
        with pytest.raises(IndexError, match=rf"^index {bad} at position 3 {words}; "
                                             rf"expected 0 <= index < {AXIS}\b"):
            lf.index_select(x, 0, lazy).compute()
