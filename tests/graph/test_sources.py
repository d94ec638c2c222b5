"""Sources (`graph.sources`): lazy inputs recognised, numpy arrays wrapped as views not copies, dtypes
lazyfuel cannot hold refused."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel.graph import ops

from .small_array import A


def test_unsupported_dtype_is_refused():
    with pytest.raises(TypeError, match=r"unsupported numpy dtype timedelta64\[s\]"):
        lf.from_array(np.zeros(3, "m8[s]"))


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
