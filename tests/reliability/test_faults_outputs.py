"""No partial outputs (issue 8, item 3): a run that fails part way leaves nothing that reads as complete.

`Array.to_zarr` marks its array incomplete until the last chunk is in (`lf.from_zarr` refuses it
meanwhile); the pipeline's .npy outputs are written beside their path and moved in at the end;
`compute()` raises instead of returning. Failures: an out-of-range lazy index in the last block,
and device losses past the one retry.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import zarr

import lazyfuel as lf
from lazyfuel.backends.vulkan import faults
from lazyfuel.backends.vulkan.check import DeviceLostError
from lazyfuel.completion import IncompleteStoreError
from lazyfuel.pipeline import outputs
from lazyfuel.pipeline.spec import OutputSpec
from reliability import fault_fixtures

fault_pools = fault_fixtures.fault_pools  # the fixture

RNG = np.random.default_rng(81)
X = RNG.standard_normal((64, 40)).astype(np.float32)
GOOD = RNG.integers(0, 64, 64)
BAD = GOOD.copy()
BAD[60] = 64  # in the last of four index blocks


def selected(indices: np.ndarray) -> lf.Array:
    """Rows of X picked by lazy indices in four blocks, then a masked_fill: four tasks."""
    idx = da.from_array(indices, chunks=16)
    return lf.masked_fill(lf.index_select(lf.from_array(X, chunks=(16, 40)), 0, idx), X[GOOD] > 1, 0.0)


WANT = np.where(X[GOOD] > 1, np.float32(0), X[GOOD])


@pytest.fixture(autouse=True)
def one_thread():
    """Blocks in order, so that "the k-th submit" is the same task on every run."""
    with dask.config.set(scheduler="sync"):
        yield


def test_a_failed_to_zarr_leaves_nothing_at_its_path_and_a_rerun_works(fault_pools, tmp_path):
    path = tmp_path / "rows.zarr"
    with pytest.raises(IndexError, match="index 64 at position 60 is out of range; expected 0 <= index < 64"):
        selected(BAD).to_zarr(path)
    assert list(tmp_path.iterdir()) == []  # written beside the path, removed on failure
    selected(GOOD).to_zarr(path)  # no overwrite=True needed, and no zarr ContainsArrayError (issue 16, #12)
    assert zarr.open_array(str(path), mode="r").attrs["lazyfuel"]["complete"] is True
    np.testing.assert_array_equal(lf.from_zarr(path).compute(), WANT)


def test_a_failed_to_zarr_into_a_store_object_is_refused_by_from_zarr(fault_pools):
    store = zarr.storage.MemoryStore()  # not a local path: written in place, guarded by the marker
    with pytest.raises(IndexError, match="index 64 at position 60"):
        selected(BAD).to_zarr(store)
    assert zarr.open_array(store, mode="r").attrs["lazyfuel"] == {"complete": False}
    with pytest.raises(IncompleteStoreError, match=r"is incomplete: lazyfuel began writing it and "
                                                    r"the run did not finish \(attribute lazyfuel.complete"):
        lf.from_zarr(store)
    selected(GOOD).to_zarr(store)  # an incomplete lazyfuel array is replaced without overwrite=True
    np.testing.assert_array_equal(lf.from_zarr(store).compute(), WANT)


def test_device_losses_past_the_retry_leave_no_store(fault_pools, tmp_path):
    path = tmp_path / "rows.zarr"
    selected(GOOD).to_zarr(path)
    before = lf.from_zarr(path).compute()
    with faults.device_lost(count=2, after=3) as lost, pytest.raises(DeviceLostError, match="lost twice"):
        selected(GOOD).to_zarr(path, overwrite=True)
    assert lost.fired == 2
    np.testing.assert_array_equal(lf.from_zarr(path).compute(), before)  # the old store is intact
    assert [p.name for p in tmp_path.iterdir()] == ["rows.zarr"]


def test_compute_raises_rather_than_return_part_of_the_result(fault_pools):
    with pytest.raises(IndexError, match="index 64 at position 60"):
        selected(BAD).compute()
    with faults.device_lost(count=2, after=2), pytest.raises(DeviceLostError):
        selected(GOOD).compute()
    np.testing.assert_array_equal(selected(GOOD).compute(), WANT)


def test_pipeline_outputs_of_a_failed_run_do_not_look_complete(fault_pools, tmp_path):
    npy, store = tmp_path / "out" / "rows.npy", tmp_path / "out" / "rows.zarr"
    specs = [OutputSpec("rows", "npy", npy, 1), OutputSpec("rows", "zarr", store, 2)]
    npy.parent.mkdir()
    np.save(npy, np.zeros(3))  # an earlier run's output: it stays until this run's replaces it
    targets = [outputs.target(spec, selected(BAD), "graph.yaml") for spec in specs]
    with pytest.raises(IndexError, match="position 60"):
        da.compute(*targets, scheduler="sync")
    np.testing.assert_array_equal(np.load(npy), np.zeros(3))
    assert not store.exists()  # written beside its path: nothing there reads as complete
    left = sorted(p.name for p in npy.parent.iterdir())
    assert [n.split("-")[0] for n in left] == [".rows.npy.tmp", ".rows.zarr.tmp", "rows.npy"], left
    outputs.discard(specs)  # what `lazyfuel run` does after a failure
    assert sorted(p.name for p in npy.parent.iterdir()) == ["rows.npy"]
    targets = [outputs.target(spec, selected(GOOD), "graph.yaml") for spec in specs]
    da.compute(*targets, scheduler="threads")
    np.testing.assert_array_equal(np.load(npy), WANT)
    assert sorted(p.name for p in npy.parent.iterdir()) == ["rows.npy", "rows.zarr"]
    np.testing.assert_array_equal(lf.from_zarr(store).compute(), WANT)
