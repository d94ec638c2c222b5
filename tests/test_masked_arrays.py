"""numpy masked arrays are refused, never stripped of their masks (issue 16, case 12): as data,
indices or masks, concrete or inside a dask array, with a TypeError saying what to pass instead."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import lazyfuel as lf

DATA = np.arange(12, dtype=np.float32).reshape(3, 4)
MASKED_DATA = np.ma.masked_array(DATA, mask=DATA > 6)
MASKED_INDICES = np.ma.masked_array(np.array([2, 0, 1]), mask=[False, True, False])
MASKED_MASK = np.ma.masked_array(DATA > 3, mask=DATA > 8)


def _refused(what: str) -> pytest.RaisesExc:
    return pytest.raises(TypeError, match=rf"^{what} is a numpy masked array; .* pass "
                                          rf"{what}\.filled\(value\) .* or {what}\.data ")


@pytest.mark.parametrize("build", [
    lambda: lf.from_array(MASKED_DATA),
    lambda: lf.asarray(MASKED_DATA),
    lambda: lf.index_select(MASKED_DATA, 0, [1]),
    lambda: lf.masked_fill(MASKED_DATA, DATA > 3, 0.0),
    lambda: lf.fft(MASKED_DATA),
    lambda: lf.from_array(da.from_array(MASKED_DATA, chunks=2)),
], ids=["from_array", "asarray", "index_select", "masked_fill", "fft", "dask"])
def test_masked_data_is_refused(build) -> None:
    with _refused("data"):
        build()


@pytest.mark.parametrize("build", [
    lambda: lf.index_select(DATA, 0, MASKED_INDICES),
    lambda: lf.gather(DATA, 0, np.ma.masked_array(np.zeros((2, 4), np.int64), mask=np.eye(2, 4))),
    lambda: lf.index_select(DATA, 0, da.from_array(MASKED_INDICES, chunks=2)),
], ids=["index_select", "gather", "lazy"])
def test_masked_indices_are_refused(build) -> None:
    with _refused("indices"):
        build()


@pytest.mark.parametrize("mask", [MASKED_MASK, da.from_array(MASKED_MASK, chunks=2)], ids=["numpy", "dask"])
def test_masked_masks_are_refused(mask) -> None:
    with _refused("mask"):
        lf.masked_fill(DATA, mask, 0.0)


def test_what_the_message_suggests_works() -> None:
    got = lf.masked_fill(MASKED_DATA.filled(-1.0), MASKED_MASK.data, 0.0).compute()
    np.testing.assert_array_equal(got, np.where(DATA > 3, 0.0, np.where(DATA > 6, -1.0, DATA)))
    np.testing.assert_array_equal(lf.index_select(DATA, 0, MASKED_INDICES.data).compute(), DATA[[2, 0, 1]])
