"""Slab writes (`graph.passes.write_slabs`): a select over a zarr store larger than the budget is cut
into slabs of whole chunks along its dim, each the same select of its indices; smaller results,
lazy indices and other sources are written whole (None)."""

from __future__ import annotations

import dask.array as da
import numpy as np
import zarr

import lazyfuel as lf
from lazyfuel.graph.passes import write_slabs


def test_a_select_over_a_store_past_the_budget_is_cut_into_slabs_bit_exact(tmp_path, bits_equal) -> None:
    data = np.random.default_rng(81).standard_normal((40, 8)).astype(np.float32)
    z = zarr.create_array(store=str(tmp_path / "s.zarr"), shape=data.shape, dtype=data.dtype, chunks=(4, 8))
    z[...] = data
    idx = np.random.default_rng(82).integers(0, 40, 30)
    node = lf.index_select(lf.from_zarr(str(tmp_path / "s.zarr")), 0, idx)._node
    axis, slabs = write_slabs(node, budget=4 * 8 * 4 * 2)  # two chunks of rows a slab
    assert axis == 0 and [lo for lo, _ in slabs] == [0, 8, 16, 24]
    got = np.concatenate([lf.Array(slab).compute() for _, slab in slabs])
    bits_equal(got, data[idx])
    assert write_slabs(node, budget=node.dtype.itemsize * 30 * 8) is None  # fits: written whole
    lazy = lf.index_select(lf.from_zarr(str(tmp_path / "s.zarr")), 0, da.from_array(idx, chunks=10))._node
    assert write_slabs(lazy, budget=1) is None
    assert write_slabs(lf.index_select(lf.from_array(data, chunks=(4, 8)), 0, idx)._node, budget=1) is None
