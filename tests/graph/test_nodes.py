"""The base node, leaves and `Deferred` (`graph.nodes`): a source's shape, dtype, chunks and blocks,
chunks that do not fit the shape refused, a rechunk's own chunks and name, bytes of a node."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from lazyfuel.graph.nodes import Rechunk, Source, nbytes, resolved


def test_a_source_is_its_dask_arrays_shape_dtype_chunks_and_blocks() -> None:
    node = Source(da.from_array(np.zeros((5, 6), np.float16), chunks=(2, 4)))
    assert (node.shape, node.dtype, node.chunks, node.ndim) == ((5, 6), np.float16, ((2, 2, 1), (4, 2)), 2)
    assert node.blocks() == [(i, j) for i in range(3) for j in range(2)]
    assert node.inputs == () and node.label == "source" and nbytes(node) == 60
    assert resolved(node) is node


def test_a_rechunk_has_its_own_chunks_and_name_and_bad_chunks_are_refused() -> None:
    source = Source(da.from_array(np.zeros((5, 6), np.float32), chunks=(2, 4)))
    again = Rechunk(source, ((5,), (3, 3)))
    assert again.chunks == ((5,), (3, 3)) and again.shape == (5, 6) and again.dtype == np.float32
    assert again.inputs == (source,) and again.name != source.name
    assert again.name == Rechunk(source, ((5,), (3, 3))).name != Rechunk(source, ((5,), (6,))).name
    with pytest.raises(ValueError, match=r"Rechunk: chunks \(\(5,\),\) do not fit shape \(5, 6\)"):
        Rechunk(source, ((5,),))
