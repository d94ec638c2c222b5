"""A select's rows read by a kernel from the host table where it lies (`backends/vulkan/host_gather.py`,
issue 18 item 4): the table's pages imported in segments (kept for later computes), one dispatch
reading every segment the ids hit straight into the result's device memory. On the real pool
(lavapipe imports host memory too), poisoned (every fresh allocation 0xA5: a row never written
shows up), validation on; bit-equal with numpy on fresh random data."""

from __future__ import annotations

import gc
import re
import warnings

import numpy as np
import pytest
from vulkan_helpers import random_rows, row_positions

import lazyfuel as lf
from lazyfuel import checks
from lazyfuel.backends.cpu.priors import host_prior
from lazyfuel.backends.vulkan import host_gather
from lazyfuel.backends.vulkan.executor import VulkanExecutor
from lazyfuel.backends.vulkan.host_gather import gather_in_place, segment_bytes, unkept_bytes
from lazyfuel.backends.vulkan.kept import SEGMENT
from lazyfuel.contracts.model import Backend
from lazyfuel.graph.touched import InPlace, KeptWays, Streaming, streamed_where_cheaper
from lazyfuel.judge import MeasuredCosts
from lazyfuel.planner import Chain, OpNode, Planner
from lazyfuel.providers import default_registry
from lazyfuel.registry.cost import DevicePrior, LinkPrior, Throughput

DTYPES = [np.float32, np.uint8, np.int16, np.float64, np.complex128, np.bool_]
WIDTHS = [(), (3,), (64,), (1024,), (7, 5)]  # rows of 1 B (uint8 scalars) .. 4 KiB (f32 x 1024)
SELECT = Chain(2, (OpNode("IndexSelect", (0, 1), (("dim", 0),)),), (2,))


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the unmeasured-cost notice: no judge run here
        yield


@pytest.fixture
def small_limit(importing):
    """maxMemoryAllocationSize as the importer sees it lowered to 64 KiB: segments of 32 KiB, so a
    table of a few hundred KiB is many imports and rows straddle segment ends."""
    imports = importing.allocator.imports
    saved = imports.max_allocation
    imports.max_allocation = 64 << 10
    yield importing
    imports.max_allocation = saved


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("kind", ["random", "sorted", "repeated"])
def test_the_rows_are_read_in_place_bit_for_bit(importing, bits_equal, dtype, width, kind) -> None:
    source = random_rows(1501, width, dtype, seed=len(width) * 7 + DTYPES.index(dtype))
    positions = row_positions(kind, len(source), 1200, seed=11)
    with lf.profile() as p:
        block = gather_in_place(importing, source, positions)
        assert block is not None
        got = np.asarray(block)
        del block
    bits_equal(got, source[positions])
    assert p.dispatches == 1 and p.submits >= 1, p  # one dispatch reads every row (and the check copies down)
    assert p.bytes_uploaded == source[positions].nbytes + 4 * len(positions), p  # rows and ids


@pytest.mark.parametrize("width", [(12,), (1024,)])  # 48 B rows straddle segment ends; 4 KiB rows
def test_a_table_of_many_segments_under_a_small_allocation_limit(small_limit, bits_equal, width) -> None:
    assert segment_bytes(small_limit) == 32 << 10
    owner = random_rows(10007, width, np.float32, seed=5)  # its last segment shorter than the rest
    source = owner[101:9999]  # a view starting inside a segment
    positions = row_positions("random", len(source), 3000, seed=6)
    gc.collect()  # an earlier test's table collected meanwhile would release its import: one fewer
    live = small_limit.allocator.imports.live
    block = gather_in_place(small_limit, source, positions)
    assert block is not None
    bits_equal(np.asarray(block), source[positions])
    assert small_limit.allocator.imports.live - live == -(-owner[:9999].nbytes // (32 << 10)) - \
        owner[:101].nbytes // (32 << 10)  # one import per segment the view covers, all kept
    del block, source, owner


def test_a_table_is_imported_once_and_read_again_from_its_kept_import(importing, bits_equal) -> None:
    source = random_rows(4096, (256,), np.float32, seed=7)
    positions = row_positions("random", len(source), 2000, seed=8)
    kept = importing.kept
    assert unkept_bytes(importing, source) == source.nbytes
    made = kept.made
    first = gather_in_place(importing, source, positions)
    assert kept.made == made + 1 and unkept_bytes(importing, source) == 0
    again = gather_in_place(importing, source, positions[::-1].copy())
    assert kept.made == made + 1  # nothing pinned the second time
    bits_equal(np.asarray(first), source[positions])
    bits_equal(np.asarray(again), source[positions[::-1]])
    live = kept.live
    del first, again, source
    assert kept.live == live - 1  # the owner went: its import is released


def test_segments_are_a_gib_under_the_devices_limit(pool) -> None:
    assert segment_bytes(pool) == min(SEGMENT, segment_bytes(pool))
    assert segment_bytes(pool) + 2 * pool.allocator.imports.page <= pool.info.max_memory_allocation_size


def test_a_bad_position_is_refused_naming_it_and_nothing_is_held(importing) -> None:
    source = random_rows(4000, (64,), np.float32, 2)
    positions = np.arange(4000, dtype=np.int64)[::-1].copy()
    positions[3000] = 4000
    before = importing.allocator.in_use
    with pytest.raises(IndexError, match=r"position 4000 at position 3000 is out of range; "
                                         r"expected 0 <= position < 4000"):
        gather_in_place(importing, source, positions)
    positions[3000] = -1
    with pytest.raises(IndexError, match=r"position -1 at position 3000 is negative"):
        gather_in_place(importing, source, positions)
    assert importing.allocator.in_use == before
    assert importing.resources()["idle_contexts"] == importing.resources()["contexts"]


def test_a_view_that_is_not_c_contiguous_is_refused_naming_what_is_taken(importing) -> None:
    with pytest.raises(ValueError, match="C-contiguous source of rank >= 1 and 1-d positions"):
        gather_in_place(importing, random_rows(100, (8,), np.float32, 3)[:, ::2],
                        np.arange(4, dtype=np.uint32))


def test_memory_numpy_did_not_allocate_is_not_read_in_place(importing) -> None:
    foreign = np.frombuffer(bytearray(random_rows(512, (16,), np.float32, 4).tobytes()), np.float32)
    assert gather_in_place(importing, foreign.reshape(512, 16), np.arange(8, dtype=np.uint32)) is None


def test_no_positions_make_an_empty_block(importing) -> None:
    block = gather_in_place(importing, random_rows(10, (4,), np.float32, 1), np.zeros(0, np.uint32))
    assert block is not None and np.asarray(block).shape == (0, 4)


@pytest.mark.parametrize("kind", ["random", "sorted", "repeated"])
def test_compute_on_the_device_reads_the_rows_in_place_when_forced(importing, bits_equal, kind) -> None:
    rng = np.random.default_rng(20)
    table = rng.standard_normal((8000, 96)).astype(np.float32)  # 8 chunks, the last one shorter
    ids = row_positions(kind, len(table), 3000, seed=21)
    y = lf.from_array(table, chunks=(1024, 96)).index_select(0, ids)
    with lf.config(host_rows="in-place"), lf.profile() as p:
        result = y.compute(device=True)
        on_host = result.__dlpack_device__()[0] == 1  # kDLCPU (lavapipe); a GPU's goes to CUDA
        got = np.from_dlpack(result).copy() if on_host else np.asarray(result)
        del result
    bits_equal(got, table[ids])
    assert not p.where, p  # no program ran
    assert p.dispatches == p.submits >= 1, p  # one dispatch a task, each reading every chunk hit
    assert p.bytes_uploaded == table[ids].nbytes + 4 * len(ids), p  # rows and ids, never the table


def test_ids_checked_by_the_graph_are_not_read_again_per_task(importing, bits_equal, monkeypatch) -> None:
    """The graph checked the ids when the op was built: each task's read in place uploads them
    without a second range check (W2 on the H200: 0.8-3.5 ms a task under the GIL); a direct call
    still checks them."""
    seen = []

    def counted(positions, *args, **kwargs):
        seen.append(len(positions))
        return checks.checked_indices(positions, *args, **kwargs)

    monkeypatch.setattr(host_gather, "checked_indices", counted)
    rng = np.random.default_rng(24)
    table = rng.standard_normal((6000, 32)).astype(np.float32)
    ids = rng.integers(0, len(table), 4000)
    y = lf.from_array(table, chunks=(1500, 32)).index_select(0, lf.from_array(ids, chunks=1000))
    with lf.config(host_rows="in-place"), lf.profile() as p:
        result = y.compute(device=True)
    bits_equal(np.asarray(result), table[ids])
    assert not p.where and seen == [], (p, seen)  # read in place, the ids never checked again
    gather_in_place(importing, table, ids)
    assert seen == [len(ids)]


def test_forcing_the_streamed_way_gathers_on_the_host(importing, bits_equal) -> None:
    table = np.random.default_rng(22).standard_normal((4096, 64)).astype(np.float32)
    ids = row_positions("random", len(table), 2000, seed=23)
    y = lf.from_array(table, chunks=(1024, 64)).index_select(0, ids)
    with lf.config(host_rows="streamed"), lf.profile() as p:
        got = np.asarray(y.compute(device=True))
    bits_equal(got, table[ids])
    assert not p.where and p.dispatches == 0 and p.bytes_uploaded == table[ids].nbytes, p


def _discrete(pinned: float = 50e9, imports: float = 23e9) -> Planner:
    """A planner pricing Vulkan as a discrete GPU behind a link of `pinned` B/s page-locked."""
    link = LinkPrior(100e-6, 10e9, 10e9, pinned, pinned, import_bytes_per_s=imports)
    gpu = DevicePrior("discrete", Throughput(100e-6, 1e12, 1e14), link)
    priors = {Backend.Cpu: host_prior(), Backend.Vulkan: gpu}
    return Planner(default_registry(), [Backend.Vulkan, Backend.Cpu], costs=MeasuredCosts(priors=priors))


def test_the_planner_reads_in_place_once_the_table_is_used_again(importing, bits_equal) -> None:
    """Priced as a discrete GPU: a table not imported yet is streamed the first time, imported and
    read in place the next (a block of it was streamed before: decision 116), and read in place
    from then on; once kept, another table is read in place at once. Priced as lavapipe: never
    (its kernels are slow)."""
    planner, executor = _discrete(), VulkanExecutor()
    table = random_rows(65536, (256,), np.float32, seed=24)  # 64 MiB: its import priced ~2.9 ms
    ids = row_positions("random", len(table), 2048, seed=25)  # 2 MiB of rows
    streamed, ways = host_gather.streamed_of(executor.pool), []
    assert not streamed.seen(table)
    for _ in range(4):
        with lf.profile() as p:
            block = streamed_where_cheaper(planner, SELECT, [table, ids], Backend.Vulkan, executor)
        bits_equal(np.asarray(block), table[ids])
        ways.append("in-place" if p.dispatches else "streamed")
        del block
    assert ways == ["streamed", "in-place", "in-place", "in-place"], ways
    assert streamed.seen(table)
    other = random_rows(65536, (256,), np.float32, seed=26)
    assert gather_in_place(importing, other, ids) is not None  # now kept: no import to pay
    with lf.profile() as p:
        streamed_where_cheaper(planner, SELECT, [other, ids], Backend.Vulkan, executor)
    assert p.dispatches == 1, p
    lavapipe = Planner(default_registry(), [Backend.Vulkan, Backend.Cpu], costs=MeasuredCosts(
        priors={Backend.Cpu: host_prior(), Backend.Vulkan: DevicePrior(
            "cpu", Throughput(200e-6, 1e9, 5e9), LinkPrior(100e-6, 8e9, 8e9, import_bytes_per_s=100e9))}))
    with lf.profile() as p:
        streamed_where_cheaper(lavapipe, SELECT, [other, ids], Backend.Vulkan, executor)
    assert p.dispatches == 0, p  # the host gathers faster than lavapipe's kernel reads


def test_the_ways_are_picked_by_cost_and_the_knob() -> None:
    stream = Streaming(0.030, 0.021, 64, 1 << 30)  # ~0.0303 s
    read = InPlace(0.022, 0.180, 1 << 30, 4 << 30)
    ways = KeptWays(0.060, None, stream, read)
    assert ways.pick() == "streamed"  # the import is not paid yet
    assert ways.pick(reused=True) == "in-place"  # the table streamed before: its import pays
    assert KeptWays(0.060, None, Streaming(0.010, 0.010, 64, 1 << 30), read).pick(reused=True) == "streamed"
    assert KeptWays(0.060, None, stream, InPlace(0.022, 0.0, 1 << 30, 0)).pick() == "in-place"
    assert KeptWays(0.020, None, stream, read).pick() == "program"
    assert KeptWays(0.060, None, stream, None).pick() == "streamed"
    with lf.config(host_rows="in-place"):
        assert ways.pick() == "in-place"
        assert KeptWays(0.060, None, stream, None).pick() == "streamed"  # no reader: cannot
    with lf.config(host_rows="streamed"):
        assert KeptWays(0.010, None, stream, InPlace(0.001, 0.0, 1 << 30, 0)).pick() == "streamed"


def test_explain_on_the_device_names_the_way_and_the_bytes_over_the_link(importing) -> None:
    rows = 16384
    ids = np.random.default_rng(27).integers(0, rows, 4096)
    y = lf.from_array(random_rows(rows, (256,), np.float32, 28), chunks=(rows // 8, 256)).index_select(0, ids)
    with lf.config(host_rows="in-place"):
        text = lf.explain(y, device=True)
    assert "result kept on Vulkan: rows read by a kernel on Vulkan from the host table's imported pages" \
        in text, text
    assert f"import {rows * 1024} bytes" in text and re.search(r"\d+ bytes over the link, none down", text)
    assert "no program runs" in text and "gathered on the host into page-locked staging" in text, text
    text = lf.explain(y, device=True)  # by cost: on lavapipe its kernels read slower than the host gathers
    assert "rows read by a kernel on Vulkan" in text and "gathered on the host" in text, text
    if importing.info.kind == "cpu":
        assert "result kept on Vulkan: gathered on the host" in text, text


def test_a_table_streamed_is_seen_again_and_forgotten_with_it(pool) -> None:
    tables = host_gather.StreamedTables(pool)
    table = random_rows(64, (4,), np.float32, 29)
    assert not tables.seen(table)
    assert not tables.seen(table, mark=True)  # streamed just now: not before
    assert tables.seen(table) and tables.seen(table[8:])  # a view: the same table
    other = random_rows(64, (4,), np.float32, 30)
    assert not tables.seen(other)
    foreign = np.frombuffer(bytearray(16), np.float32)  # not numpy's memory: never kept
    assert not tables.seen(foreign, mark=True) and not tables.seen(foreign)
    del table
    assert len(tables._seen) == 0


def test_a_read_in_place_is_priced_by_its_rows_its_bytes_and_the_import() -> None:
    link = LinkPrior(0.0, 10e9, 10e9, 50e9, 50e9, import_bytes_per_s=20e9, read_row_s=25e-9)
    costs = MeasuredCosts(priors={Backend.Vulkan: DevicePrior("discrete", Throughput(0.0, 1e12, 1e14), link)})
    gib = 1 << 30
    assert costs.host_read_cost(Backend.Vulkan, gib, 4096, 0) == pytest.approx(gib / 50e9)  # the link
    assert costs.host_read_cost(Backend.Vulkan, gib, 4, 0) == pytest.approx(gib // 4 * 25e-9)  # its rows
    imported = costs.host_read_cost(Backend.Vulkan, gib, 4096, 4 * gib)
    assert imported == pytest.approx(gib / 50e9 + 4 * gib / 20e9)  # pinning the table first
    slow = MeasuredCosts(priors={Backend.Vulkan: DevicePrior("cpu", Throughput(0.0, 1e9, 5e9), link)})
    assert slow.host_read_cost(Backend.Vulkan, gib, 4096, 0) == pytest.approx(2 * gib / 1e9)  # the kernel


