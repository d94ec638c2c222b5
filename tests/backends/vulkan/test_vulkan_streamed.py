"""A select's rows gathered on the host straight into a device block, piece by piece through
page-locked staging while earlier pieces upload (`backends/vulkan/streamed.py`, issue 18 item 4).
On the real pool, poisoned (every fresh allocation 0xA5: a row never written shows up), in each
transfer mode; bit-equal with numpy on fresh random data."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
from vulkan_helpers import random_rows, row_positions

import lazyfuel as lf
from lazyfuel.backends.vulkan import streamed
from lazyfuel.backends.vulkan.executor import VulkanExecutor
from lazyfuel.backends.vulkan.memtypes import Use
from lazyfuel.backends.vulkan.residency import ResidentBlock
from lazyfuel.backends.vulkan.streamed import gather_up
from lazyfuel.backends.vulkan.transfer import in_mode

DTYPES = [np.float32, np.uint8, np.int16, np.float64, np.complex64, np.bool_]


@pytest.fixture
def small_pieces(monkeypatch):
    """Pieces of 64 KiB, so a test's result crosses in many pieces (several in flight at once)."""
    monkeypatch.setattr(streamed, "PIECE_BYTES", 64 << 10)
    monkeypatch.setattr(streamed, "RUN_BYTES", 16 << 10)


@pytest.mark.parametrize("mode", [None, "staged", "import"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("width", [(), (3,), (256,), (7, 5)])
@pytest.mark.parametrize("kind", ["random", "sorted", "repeated"])
def test_the_rows_land_in_the_block_bit_for_bit(pool, bits_equal, small_pieces, mode, dtype, width,
                                                  kind) -> None:
    source = random_rows(3001, width, dtype, seed=len(width) * 7 + DTYPES.index(dtype))
    positions = row_positions(kind, len(source), 2500, seed=11)
    with in_mode(pool, mode), lf.profile() as p:
        block = gather_up(pool, source, positions)
        got = np.asarray(block)
        del block
    bits_equal(got, source[positions])
    nbytes = source[positions].nbytes
    assert p.bytes_uploaded == nbytes, p  # the rows up
    assert p.bytes_downloaded == nbytes, p  # the check's copy down
    if mode is not None:  # device memory not mapped: one submit a piece
        row_bytes = nbytes // len(positions)
        assert p.submits == streamed.pieces(nbytes, row_bytes), p
        assert p.submits > 2 or nbytes <= 2 * streamed.PIECE_BYTES, p


@pytest.mark.parametrize("mode", [None, "staged", "import"])
@pytest.mark.parametrize(("dtype", "width"), [(np.float32, (256,)), (np.uint8, ()), (np.int16, (7, 5))])
def test_the_rows_land_in_a_given_part_and_nowhere_else(pool, bits_equal, small_pieces, mode, dtype,
                                                        width) -> None:
    """`into=`: a part of a larger block (a compute's one result allocation) gets the rows, the
    block's other bytes keep what they held, `into` itself is returned and left unpinned."""
    source = random_rows(3001, width, dtype, seed=21)
    positions = row_positions("random", len(source), 2500, seed=22)
    background = random_rows(2600, width, dtype, seed=23)
    with in_mode(pool, mode):
        whole = ResidentBlock.upload(pool, background)
        part = whole.part(60 * source[:1].nbytes, (2500, *width))
        got = gather_up(pool, source, positions, into=part)
        assert got is part
        assert whole._slot.pins == 0, whole._slot.pins  # gather_up gave its pin back
        host = np.asarray(whole)
        del whole, part, got
    bits_equal(host[60:2560], source[positions])
    bits_equal(host[:60], background[:60])
    bits_equal(host[2560:], background[2560:])


def test_a_part_of_another_shape_is_refused(pool) -> None:
    source = random_rows(100, (8,), np.float32, 23)
    whole = ResidentBlock.reserve(pool, (50, 8), np.float32)
    with pytest.raises(ValueError, match=r"gather_up\(into=...\) takes a block of .* shape \(40, 8\) and "
                                         r"dtype float32"):
        gather_up(pool, source, np.arange(40), into=whole.part(0, (30, 8)))
    whole.free()


def test_no_positions_make_an_empty_block(pool) -> None:
    block = gather_up(pool, random_rows(10, (4,), np.float32, 1), np.zeros(0, np.uint32))
    assert block.shape == (0, 4) and np.asarray(block).shape == (0, 4)


def test_a_bad_position_is_refused_naming_it_and_nothing_is_held(pool, small_pieces) -> None:
    source = random_rows(4000, (64,), np.float32, 2)
    positions = np.arange(4000, dtype=np.int64)[::-1].copy()
    positions[3000] = 4000  # past the end: refused before any piece moves
    with in_mode(pool, "staged") as allocator:
        before = allocator.in_use
        with pytest.raises(IndexError, match=r"position 4000 at position 3000 is out of range; "
                                             r"expected 0 <= position < 4000"):
            gather_up(pool, source, positions)
        assert allocator.in_use == before
        assert pool.resources()["idle_contexts"] == pool.resources()["contexts"]


def test_a_view_that_is_not_c_contiguous_is_refused_naming_what_is_taken(pool) -> None:
    with pytest.raises(ValueError, match="C-contiguous source of rank >= 1 and 1-d positions"):
        gather_up(pool, random_rows(100, (8,), np.float32, 3)[:, ::2], np.arange(4, dtype=np.uint32))


def test_the_executor_counts_one_piece_where_device_memory_is_mapped(pool) -> None:
    executor = VulkanExecutor()
    with in_mode(pool, "staged"):
        assert executor.pieces(64 << 20, 1024) == -(-(64 << 20) // streamed.PIECE_BYTES)
        assert executor.pieces(0, 1024) == 0
    if pool.allocator.direct:  # lavapipe: the rows are taken straight into the block
        assert executor.pieces(64 << 20, 1024) == 1


@pytest.mark.parametrize("threads", [1, 4, 16])
def test_a_piece_is_cut_in_runs_of_4_mib(threads) -> None:
    """A 16 MiB piece of 1 KiB rows: runs of `RUN_BYTES` (4 of them, whatever the threads: the
    tasks beside take the other threads); the runs cover the piece once, in order."""
    rows = streamed.PIECE_BYTES // 1024
    with lf.config(copy_threads=threads):
        runs = streamed.piece_runs(rows, 1024)
    assert len(runs) == (1 if threads == 1 else 4), runs
    assert runs[0][0] == 0 and runs[-1][1] == rows and all(a[1] == b[0] for a, b in pairwise(runs))


def test_pieces_are_staged_in_the_upload_type(pool, bits_equal, small_pieces) -> None:
    """The write-combined upload type (host-cached staging measured alike on the H200, gone);
    bit-equal, on 4 copy threads."""
    source = random_rows(5000, (40,), np.float32, 31)
    positions = row_positions("random", len(source), 4000, seed=32)
    with in_mode(pool, "staged") as allocator, lf.config(copy_threads=4):
        block = gather_up(pool, source, positions)
        uses = {b.use for b in allocator._blocks if b.staging}
        got = np.asarray(block)
        del block
    bits_equal(got, source[positions])
    assert uses == {Use.UPLOAD}, uses


@pytest.mark.parametrize("mode", ["staged", "import"])
@pytest.mark.parametrize("flight", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.complex64, np.bool_])
@pytest.mark.parametrize("width", [(), (3,), (1024,), (7, 5)])  # rows of 1 B .. 4 KiB
@pytest.mark.parametrize("kind", ["random", "sorted", "repeated"])
def test_pieces_in_flight_land_in_the_block_bit_for_bit(pool, bits_equal, small_pieces, monkeypatch, mode,
                                                        flight, dtype, width, kind) -> None:
    """`IN_FLIGHT` pieces uploading while the next is gathered on 4 copy threads, the last piece
    short; poisoned staging and block, so a row no run wrote shows up."""
    monkeypatch.setattr(streamed, "IN_FLIGHT", flight)
    source = random_rows(3001, width, dtype, seed=len(width) * 3 + flight)
    positions = row_positions(kind, len(source), 2500, seed=17)
    with in_mode(pool, mode) as allocator, lf.config(copy_threads=4), lf.profile() as p:
        block = gather_up(pool, source, positions)
        got = np.asarray(block)
        del block
        in_use = allocator.in_use
    bits_equal(got, source[positions])
    nbytes = source[positions].nbytes
    assert p.bytes_uploaded == nbytes and p.submits == streamed.pieces(nbytes, nbytes // len(positions)), p
    assert in_use == 0  # every piece's staging given back
    assert pool.resources()["idle_contexts"] == pool.resources()["contexts"]


def test_a_bad_position_is_refused_before_any_piece_is_queued(pool, small_pieces) -> None:
    source = random_rows(4000, (64,), np.float32, 2)
    positions = np.arange(4000, dtype=np.int64)
    positions[10] = -4001
    with in_mode(pool, "staged") as allocator:
        with pytest.raises(IndexError, match=r"position -4001 at position 10 is negative; "
                                             r"expected 0 <= position < 4000"):
            gather_up(pool, source, positions)
        assert allocator.in_use == 0


def test_staging_that_cannot_be_had_midway_leaves_nothing_held(pool, bits_equal, monkeypatch) -> None:
    """The second piece's staging fails (a real VK_ERROR_OUT_OF_DEVICE_MEMORY injected where the
    allocator makes a block) while the first piece is being gathered or uploaded: MemoryError, the
    copy threads done with the staging before it is freed, every context idle, nothing in use;
    the pool streams again afterwards, bit for bit."""
    from lazyfuel.backends.vulkan import faults

    monkeypatch.setattr(streamed, "PIECE_BYTES", 17 << 20)  # over a quarter block: a block of its own
    source = random_rows(60000, (256,), np.float32, 33)
    positions = row_positions("random", len(source), 52000, seed=34)
    with in_mode(pool, "staged") as allocator, lf.config(copy_threads=4):
        with faults.out_of_device_memory(count=1, after=2) as oom:  # the result, piece 1's staging
            with pytest.raises(MemoryError):
                gather_up(pool, source, positions)
        assert oom.fired == 1
        assert allocator.in_use == 0
        assert pool.resources()["idle_contexts"] == pool.resources()["contexts"]
        block = gather_up(pool, source, positions)
        got = np.asarray(block)
        del block
    bits_equal(got, source[positions])
