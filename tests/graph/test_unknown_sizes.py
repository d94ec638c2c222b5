"""Lazy indices of unknown chunk sizes (issue 15 item 5): dask's `nonzero()` and boolean
selections. A select on them builds lazily with NaN where the sizes are unknown (as dask's
own); when it is computed, the indices alone are computed once, and the result is numpy's."""

from __future__ import annotations

import re
import threading

import dask
import dask.array as da
import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel.providers import available_backends

BACKENDS = [b.name.lower() for b in available_backends() if b.name in ("Cpu", "Vulkan")]
RNG = np.random.default_rng(15)
SRC = RNG.standard_normal((40, 6)).astype(np.float32)
PICKS = RNG.integers(0, 40, 23)
PICKS[::3] = 0  # zeros for the selections to drop


@pytest.fixture(params=BACKENDS)
def backend(request, monkeypatch):
    monkeypatch.setenv("LAZYFUEL_BACKEND", request.param)
    return request.param


class Counted:
    """A dask array of PICKS whose blocks count how often they are computed."""

    def __init__(self) -> None:
        self.runs = 0
        self.lock = threading.Lock()

    def array(self) -> da.Array:
        def count(block):
            with self.lock:
                self.runs += 1
            return block
        return da.from_array(PICKS, chunks=5).map_blocks(count, meta=np.empty(0, PICKS.dtype))


def selections(d: da.Array) -> dict[str, tuple[da.Array, np.ndarray]]:
    return {"boolean": (d[d > 0], PICKS[PICKS > 0]),
            "nonzero": (da.nonzero(d)[0], np.nonzero(PICKS)[0]),
            "values-at-nonzero": (d[da.nonzero(d)[0]], PICKS[np.nonzero(PICKS)[0]])}


@pytest.mark.parametrize("kind", ["boolean", "nonzero", "values-at-nonzero"])
def test_index_select_and_gather_on_unknown_sizes_match_numpy(backend, bits_equal, kind):
    idx, want = selections(da.from_array(PICKS, chunks=5))[kind]
    assert np.isnan(idx.shape[0])
    x = lf.from_array(SRC, chunks=(10, 6))
    y = lf.index_select(x, 0, idx)
    assert np.isnan(y.shape[0]) and y.shape[1] == 6 and np.isnan(y.chunks[0][0])  # as dask says
    bits_equal(y.compute(), SRC[want])
    g = lf.gather(lf.from_array(SRC[:, 2], chunks=10), 0, idx)
    bits_equal(g.compute(), SRC[want, 2])
    bits_equal(np.asarray(lf.index_select(x, 1, idx % 6)), SRC[:, want % 6])


def test_building_runs_nothing_and_compute_runs_the_indices_once(backend, bits_equal):
    counted = Counted()
    d = counted.array()
    idx = d[d > 0]
    y = lf.index_select(lf.from_array(SRC, chunks=(10, 6)), 0, idx)
    assert counted.runs == 0
    (got,) = dask.compute(y)
    bits_equal(got, SRC[PICKS[PICKS > 0]])
    assert counted.runs == len(d.chunks[0])  # each index block once: sizes and values together
    bits_equal(y.compute(), got)
    assert counted.runs == len(d.chunks[0])


def test_a_further_op_computes_the_indices_alone_once(backend, bits_equal):
    counted = Counted()
    d = counted.array()
    y = lf.index_select(lf.from_array(SRC, chunks=(10, 6)), 0, d[d > 0])
    z = y.masked_fill(np.ones((1, 6), bool), 1.5)  # needs the sizes: the indices are computed
    n = len(PICKS[PICKS > 0])
    assert counted.runs == len(d.chunks[0]) and z.shape == y.shape == (n, 6)
    bits_equal(z.compute(), np.full((n, 6), 1.5, np.float32))
    bits_equal(y.T.compute(), SRC[PICKS[PICKS > 0]].T)
    assert counted.runs == len(d.chunks[0])


def test_a_select_on_a_select_of_unknown_sizes(bits_equal):
    d = da.from_array(PICKS, chunks=5)
    inner = lf.index_select(lf.from_array(PICKS, chunks=5), 0, da.nonzero(d)[0])  # unknown too
    y = lf.index_select(lf.from_array(SRC, chunks=(10, 6)), 0, inner)
    assert np.isnan(y.shape[0])
    bits_equal(y.compute(), SRC[PICKS[np.nonzero(PICKS)[0]]])


def test_errors_on_unknown_sizes(backend):
    d = da.from_array(PICKS, chunks=5)
    with pytest.raises(TypeError, match="dtype float64"):
        lf.index_select(lf.from_array(SRC), 0, d[d > 0].astype(np.float64))  # when built
    bad = d[d > 0] + 100  # every value past the axis: found at compute, named with its position
    y = lf.index_select(lf.from_array(SRC, chunks=(10, 6)), 0, bad)
    with pytest.raises(IndexError, match=r"^index (\d+) at position (\d+) is out of range; "
                                         r"expected 0 <= index < 40") as raised:
        y.compute()  # a bad value of whichever block fails first, at its place in the whole array
    value, position = map(int, re.match(r"index (\d+) at position (\d+)", str(raised.value)).groups())
    assert value == PICKS[PICKS > 0][position] + 100
    with pytest.raises(ValueError, match="gather index has shape"):
        lf.gather(lf.from_array(SRC, chunks=(10, 6)), 0, da.stack([d[d > 0]] * 5, axis=1)).compute()


def test_explain_persist_and_zarr_of_a_select_on_unknown_sizes(tmp_path, bits_equal):
    d = da.from_array(PICKS, chunks=5)
    want = SRC[PICKS[PICKS > 0]]
    y = lf.index_select(lf.from_array(SRC, chunks=(10, 6)), 0, d[d > 0])
    assert f"shape ({len(want)}, 6)" in lf.explain(y)
    bits_equal(y.persist().compute(), want)
    y.to_zarr(tmp_path / "out.zarr")
    bits_equal(lf.from_zarr(tmp_path / "out.zarr").compute(), want)
