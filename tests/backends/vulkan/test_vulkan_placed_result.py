"""A `compute(device=True)` result written in place by its tasks (`graph/placed.py`, issue 18 W2):
the result's one allocation reserved before the tasks run, each in-place read
(`host_gather.gather_in_place(into=)`) or streamed block (`streamed.gather_up(into=)`) writing its
block's range of it (`ResidentBlock.part`),
nothing copied after the last kernel; every other block assembled as before. On the real pool
(lavapipe imports host memory too), poisoned (every fresh allocation 0xA5), validation on;
bit-equal with numpy on fresh random data."""

from __future__ import annotations

import gc
import importlib

import numpy as np
import pytest
from vulkan_helpers import random_rows, row_positions

import lazyfuel as lf
from lazyfuel.backends.vulkan.residency import ResidentBlock, store_of
from lazyfuel.backends.vulkan.transfer import in_mode
from lazyfuel.graph.resident import contiguous_offset

device_array = importlib.import_module("lazyfuel.backends.vulkan.device_array")  # a function of the package
pytestmark = pytest.mark.filterwarnings("ignore")  # the unmeasured-cost notice: no judge run here


@pytest.fixture
def copies(monkeypatch):
    """The device copies the assembly records (each run it copies), counted; the copies still run."""
    seen = []
    real = device_array.copy_bytes

    def counted(batch, src, src_off, dst, dst_off, n):
        seen.append(n)
        return real(batch, src, src_off, dst, dst_off, n)

    monkeypatch.setattr(device_array, "copy_bytes", counted)
    return seen


def _host(result) -> np.ndarray:
    """The result's bytes: through DLPack in place where host-visible (lavapipe), else a copy."""
    if result.__dlpack_device__()[0] == 1:
        return np.from_dlpack(result)
    return np.asarray(result)


@pytest.mark.parametrize(("dtype", "width"), [(np.float32, (256,)), (np.uint8, ()), (np.int16, (7, 5)),
                                              (np.complex128, (3,)), (np.bool_, (64,))])
@pytest.mark.parametrize("kind", ["random", "sorted", "repeated"])
def test_the_in_place_reads_write_one_allocation_and_nothing_is_assembled(importing, bits_equal, copies,
                                                                         dtype, width, kind) -> None:
    table = random_rows(6000, width, dtype, seed=len(copies) + hash(kind) % 97)
    ids = row_positions(kind, len(table), 3333, seed=31)  # blocks of 1000, the last one 333: uneven
    y = lf.from_array(table, chunks=(1500, *width)).index_select(0, lf.from_array(ids, chunks=1000))
    with lf.config(host_rows="in-place"), lf.profile() as p:
        result = y.compute(device=True)
    bits_equal(_host(result).copy(), table[ids])
    assert copies == [], copies  # every block was written in its place: no copy after the kernels
    assert not p.where and p.dispatches == p.submits == 4, p  # one read a block, nothing else
    assert result._block.whole


def test_several_computes_in_a_row_hold_and_free_their_allocations(importing, bits_equal, copies) -> None:
    """Each compute places its own allocation; an export in place (host-visible memory: lavapipe)
    keeps it valid after the DeviceArray goes, and the memory goes back once the last holder
    (array, export) lets go."""
    store = store_of(importing)
    gc.collect()
    base = store.device_bytes
    table = random_rows(8000, (32,), np.float32, seed=33)
    ids = row_positions("random", len(table), 4096, seed=34)
    y = lf.from_array(table, chunks=(2000, 32)).index_select(0, lf.from_array(ids, chunks=1024))
    with lf.config(host_rows="in-place"):
        first, second = y.compute(device=True), y.compute(device=True)
        assert first._block._slot is not second._block._slot
        exported = _host(first)
        del first
        gc.collect()
        third = y.compute(device=True)  # may reuse only what is free: the export still holds the first
        for got in (exported, _host(second), _host(third)):
            bits_equal(got.copy(), table[ids])
        assert copies == []
        del second, third, got  # the loop's last export too
        gc.collect()
        held = table[ids].nbytes if exported.base is not None else 0  # a copy holds no device memory
        assert store.device_bytes == base + held  # the export's allocation alone
        del exported
        gc.collect()
    assert store.device_bytes == base


def test_a_bad_id_raises_on_every_compute_and_holds_nothing(importing) -> None:
    store = store_of(importing)
    gc.collect()
    base = store.device_bytes
    table = random_rows(4000, (16,), np.float32, seed=35)
    ids = row_positions("random", len(table), 3000, seed=36)
    ids[2500] = len(table) + 7  # in the third block of lazy ids: checked by its task
    y = lf.from_array(table, chunks=(1000, 16)).index_select(0, lf.from_array(ids, chunks=1000))
    with lf.config(host_rows="in-place"):
        for _ in range(3):
            with pytest.raises(IndexError, match=r"4007.*2500|2500.*4007"):
                y.compute(device=True)
            gc.collect()
            assert store.device_bytes == base


@pytest.mark.parametrize("mode", [None, "staged"])
@pytest.mark.parametrize(("dtype", "width"), [(np.float32, (64,)), (np.uint8, ()), (np.complex64, (3, 2))])
def test_rows_streamed_up_write_one_allocation_and_nothing_is_assembled(importing, bits_equal, copies, mode,
                                                                       dtype, width) -> None:
    """The streamed way writes each block's rows into its part of the result too (mapped device
    memory, and piece by piece through staging): nothing copied after, no block of its own made
    beside the result's one allocation (the first W2 compute on the H200 made its 1 GiB twice)."""
    table = random_rows(3000, width, dtype, seed=37)
    ids = row_positions("random", len(table), 2500, seed=38)
    y = lf.from_array(table, chunks=(1000, *width)).index_select(0, lf.from_array(ids, chunks=1000))
    store = store_of(importing)
    with in_mode(importing, mode), lf.config(host_rows="streamed"), lf.profile() as p:
        gc.collect()
        before = store.device_bytes
        result = y.compute(device=True)
        held = store.device_bytes - before
        bits_equal(_host(result).copy(), table[ids])
    assert copies == [], copies
    assert result._block.whole and held == result._block.nbytes  # the result's allocation alone
    assert p.bytes_uploaded >= table[ids].nbytes and not p.where, p


def test_other_regions_are_assembled_as_before(importing, bits_equal, copies) -> None:
    """Blocks split over columns (no contiguous region) are copied into the result; bit for bit."""
    table = random_rows(3000, (64,), np.float32, seed=37)
    ids = row_positions("random", len(table), 2500, seed=38)
    y = lf.from_array(table, chunks=(1000, 32)).index_select(0, lf.from_array(ids, chunks=1000))
    with lf.config(host_rows="in-place"):
        bits_equal(_host(y.compute(device=True)).copy(), table[ids])
    assert len(copies) == len(ids) * 2  # a run per row of each of the 6 column blocks


def test_persist_on_the_device_keeps_its_blocks_apart(importing, bits_equal) -> None:
    """persist(device=True) never places: each block its own allocation, freeable and spillable."""
    table = random_rows(4000, (8,), np.float64, seed=39)
    ids = row_positions("sorted", len(table), 3000, seed=40)
    y = lf.from_array(table, chunks=(1000, 8)).index_select(0, lf.from_array(ids, chunks=1000))
    with lf.config(host_rows="in-place"):
        kept = y.persist(device=True)
    blocks = [b for b in kept.to_dask().__dask_graph__().values() if isinstance(b, ResidentBlock)]
    assert len(blocks) == 3 and all(b.whole for b in blocks)
    assert len({id(b._slot) for b in blocks}) == 3
    bits_equal(kept.compute(), table[ids])


def test_a_part_views_its_range_and_frees_nothing(pool, bits_equal) -> None:
    a = random_rows(96, (4,), np.float32, seed=41)
    whole = ResidentBlock.upload(pool, a)
    part = whole.part(32 * 16, (40, 4))
    bits_equal(np.asarray(part), a[32:72])
    assert not part.whole and part.shared_buffer is None and part.lies_in(whole, 32 * 16)
    assert part.reshape((160,)).lies_in(whole, 32 * 16)
    part.free()
    assert not whole.freed  # a part frees nothing
    slot = whole._slot
    del whole
    gc.collect()
    assert not slot.freed  # the part keeps its block alive
    bits_equal(np.asarray(part), a[32:72])
    del part
    gc.collect()
    assert slot.freed
    with pytest.raises(ValueError, match=r"shape \(40, 4\) at byte 1024 does not lie inside"):
        ResidentBlock.upload(pool, a).part(1024, (40, 4))


@pytest.mark.parametrize(("block", "origin", "shape", "want"), [
    ((2, 3), (4, 0), (6, 3), 12),       # whole rows
    ((1, 2), (3, 1), (6, 3), 10),       # one row's part: still one run
    ((2, 2), (1, 1), (4, 5), None),     # a tile: a run per row
    ((2, 3, 4), (1, 0, 0), (3, 3, 4), 12),
    ((1, 1, 4), (2, 1, 0), (3, 3, 4), 28),
    ((), (), (), 0),
])
def test_a_block_is_one_run_only_where_its_later_axes_are_whole(block, origin, shape, want) -> None:
    assert contiguous_offset(block, origin, shape) == want


def test_a_one_block_result_is_its_block_with_nothing_reserved_or_copied(pool, bits_equal, copies) -> None:
    """A one-block `compute(device=True)` (W4: a program over one resident block) hands over the
    program's own block: no result allocation placed beside it and no copy into one (placing
    would reserve a second allocation of the whole result and copy the program's block into it)."""
    table = random_rows(2048, (64,), np.float32, seed=41)
    x = lf.from_array(table, chunks=(2048, 64)).persist(device=True)
    idx = np.random.default_rng(42).permutation(2048)
    mask = np.random.default_rng(43).random((2048, 1)) < 0.5
    y = x.index_select(0, idx).masked_fill(mask, -1.0)
    for _ in range(2):
        result = y.compute(device=True)
        bits_equal(_host(result).copy(), np.where(mask, np.float32(-1), table[idx]))
        assert copies == [], copies
        assert result._block.whole and result._block.nbytes == table.nbytes
        del result
        gc.collect()
