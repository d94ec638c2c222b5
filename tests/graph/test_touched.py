"""Move only what is touched (issue 18 item 4): a gather or index_select over a host source sends
a device the rows its indices hit, not the table; the Cpu reads the table in place; a source
larger than the device's largest allocation works. Bit-equal with numpy on fresh random data."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel.backends.cpu.priors import host_prior
from lazyfuel.backends.vulkan.priors import kind_prior
from lazyfuel.contracts.model import Backend
from lazyfuel.graph.touched import stageable, staged_where_cheaper, touched_rows
from lazyfuel.judge import MeasuredCosts
from lazyfuel.planner import Chain, OpNode, Planner
from lazyfuel.providers import default_registry

SELECT = Chain(2, (OpNode("IndexSelect", (0, 1), (("dim", 0),)),), (2,))
ROW = 256 * 4  # bytes of one (., 256) f32 row


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the unmeasured-cost notice: no judge run here
        yield


@pytest.fixture(autouse=True)
def _kind_link():
    """Price the link with the device kind's prior (lavapipe: 8 GB/s, a CPU copy), not the pool's
    probe: in lavapipe's zero-copy mode the probe prices an upload as an import, where staging the
    touched rows no longer pays (both ways measured alike here), and these tests pin the staging."""
    from lazyfuel import api

    api._planner.cache_clear()
    with lf.config(link_probe=False):
        yield
    api._planner.cache_clear()


def _table(rows: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, 256), dtype=np.float32)


@pytest.mark.parametrize("count", [1, 7, 5000, 40000])
def test_touched_rows_are_the_distinct_positions_and_their_places(count) -> None:
    rng = np.random.default_rng(count)
    positions = rng.integers(0, 65536, count).astype(np.uint32)  # both ways: sorted, or one pass
    rows, places = touched_rows(positions, 65536)
    assert np.array_equal(rows, np.unique(positions))
    assert places.dtype == np.uint32 and np.array_equal(rows[places], positions)
    grid = positions.reshape(-1, 1) if count % 2 else positions
    assert np.array_equal(rows[touched_rows(grid, 65536)[1]], grid)


def test_a_device_gets_the_touched_rows_and_the_cpu_reads_in_place() -> None:
    table, ids = _table(65536, 1), np.random.default_rng(2).integers(0, 65536, 4096).astype(np.uint32)
    inputs = [table, ids]

    def planner(backend: Backend) -> Planner:
        priors = {Backend.Cpu: host_prior(), Backend.Vulkan: kind_prior("discrete")}
        return Planner(default_registry(), [backend], costs=MeasuredCosts(priors=priors))

    assert staged_where_cheaper(planner(Backend.Cpu), SELECT, inputs, 0, 0) is inputs  # no copy
    staged, local = staged_where_cheaper(planner(Backend.Vulkan), SELECT, inputs, 0, 0)
    assert staged.shape == (len(np.unique(ids)), 256) and staged.flags.c_contiguous
    assert np.array_equal(staged[local], table[ids])


def test_only_a_source_read_by_one_select_alone_is_staged() -> None:
    assert stageable(SELECT, 0, 0)
    assert not stageable(SELECT, 0, 1)  # the select is along another axis
    both = Chain(2, (OpNode("IndexSelect", (0, 1), (("dim", 0),)),
                     OpNode("MaskedFill", (0, 1), (("value", 0.0),))), (2, 3))
    assert not stageable(both, 0, 0)  # another step reads the source whole
    assert not stageable(Chain(2, (OpNode("transpose", (0,), ()),), (2,)), 0, 0)


@pytest.mark.parametrize("op", ["index_select", "gather"])
def test_a_gather_of_k_rows_uploads_about_k_rows(vulkan, bits_equal, op) -> None:
    rows, k = 65536, 2048  # a 64 MiB table in 8 chunks; 2 MiB of rows picked
    table = _table(rows, 3)
    ids = np.random.default_rng(4).integers(0, rows, k)
    ids[:2] = 0, rows - 1  # every block's indices span the whole table
    x = lf.from_array(table, chunks=(rows // 8, 256))
    if op == "index_select":
        y, want = x.index_select(0, ids), table[ids]
    else:
        grid = np.stack([ids] * 256, axis=1)
        y, want = lf.gather(x, 0, grid), np.take_along_axis(table, grid, axis=0)
    with lf.profile() as p:
        got = y.compute()
    bits_equal(got, want)
    index_bytes = ids.size * (4 if op == "index_select" else 4 * 256)
    assert p.bytes_uploaded <= k * ROW + index_bytes + 4096, p  # not the 64 MiB table
    assert p.where and all(backend == "Vulkan" for backend, _ in p.where)


def _past_the_largest_allocation(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A table just over the device's maxMemoryAllocationSize (lavapipe: 2 GiB) whose only rows
    holding data (and touching memory: pages never touched cost nothing) are at `count` random
    ids, the first and last row among them; and the ids."""
    from lazyfuel.backends.vulkan import get_pool

    rows = get_pool().info.max_memory_allocation_size // ROW + 1024
    big = np.empty((rows, 256), np.float32)
    ids = np.random.default_rng(seed).integers(0, rows, count)
    ids[:2] = 0, rows - 1
    big[ids] = _table(len(ids), seed + 1)
    return big, ids


def test_a_source_past_the_largest_allocation_works_on_the_device(vulkan, bits_equal) -> None:
    big, ids = _past_the_largest_allocation(512, 5)
    rows = len(big)
    y = lf.from_array(big, chunks=(rows // 8 + 1, 256)).index_select(0, ids)
    with lf.profile() as p:
        got = y.compute()
    bits_equal(got, big[ids])
    assert p.bytes_uploaded < 2 * len(ids) * ROW, p


def test_explain_says_whether_a_source_is_staged_and_the_bytes_that_cross(vulkan) -> None:
    rows = 65536
    ids = np.random.default_rng(7).integers(0, rows, 4096)
    text = lf.explain(lf.from_array(_table(rows, 8), chunks=(rows // 8, 256)).index_select(0, ids))
    assert "in0: staged, up to 4096 touched row(s) taken on the host" in text, text
    assert "Vulkan up 4.0 MiB (2 array(s)), down 4.0 MiB (1 array(s))" in text, text  # not the 64 MiB table


def test_a_read_per_source_chunk_uploads_the_rows_it_cuts(vulkan, bits_equal) -> None:
    import dask.array as da

    rows, k = 32768, 1024  # four 8 MiB chunks of separate buffers: read once each, in pieces
    parts = [_table(rows // 4, 10 + i) for i in range(4)]
    source = da.concatenate([da.from_array(p, chunks=p.shape) for p in parts])
    ids = np.random.default_rng(9).integers(0, rows, k)
    y = lf.from_array(source).index_select(0, ids)
    with lf.profile() as p:
        got = y.compute()
    bits_equal(got, np.concatenate(parts)[ids])
    assert p.bytes_uploaded <= 2 * k * ROW + 8 * k + 4096, p  # the pieces twice at most, not 32 MiB


def test_a_view_spanning_less_than_its_touched_rows_is_sent_as_it_is() -> None:
    row = np.random.default_rng(11).standard_normal(256).astype(np.float32)
    wide = np.broadcast_to(row, (65536, 256))  # spans one row: staging 4096 rows would grow it
    ids = np.random.default_rng(12).integers(0, 65536, 4096).astype(np.uint32)
    priors = {Backend.Cpu: host_prior(), Backend.Vulkan: kind_prior("discrete")}
    planner = Planner(default_registry(), [Backend.Vulkan], costs=MeasuredCosts(priors=priors))
    inputs = [wide, ids]
    assert staged_where_cheaper(planner, SELECT, inputs, 0, 0) is inputs


def _streamed_run(table: np.ndarray, ids: np.ndarray, chunk_rows: int, mode: str | None):
    """compute(device=True) of index_select(table, 0, ids) in transfer `mode`: (host copy, profile)."""
    from lazyfuel.backends.vulkan import get_pool
    from lazyfuel.backends.vulkan.transfer import in_mode

    y = lf.from_array(table, chunks=(chunk_rows, *table.shape[1:])).index_select(0, ids)
    with in_mode(get_pool(), mode), lf.profile() as p:
        result = y.compute(device=True)
        got = np.from_dlpack(result).copy() if mode is None else np.asarray(result)
        del result
    return got, p


@pytest.mark.parametrize("mode", [None, "staged"])
@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.float64])
@pytest.mark.parametrize("kind", ["random", "sorted", "repeated"])
def test_compute_on_the_device_gathers_the_rows_straight_into_device_memory(vulkan, bits_equal, mode,
                                                                            dtype, kind) -> None:
    rng = np.random.default_rng(20)
    table = rng.integers(0, 255, (8192, 96)).astype(dtype)  # 8 chunks of 1024 rows
    ids = rng.integers(0, 8192, 3000)
    if kind == "sorted":
        ids.sort()
    elif kind == "repeated":
        ids = ids % 3 * 4000
    got, p = _streamed_run(table, ids, 1024, mode)
    bits_equal(got, table[ids])
    assert not p.where, p  # no program ran: the rows went straight into the result's memory
    assert p.bytes_uploaded == table[ids].nbytes, p  # the touched rows alone, never the table


def test_compute_on_the_device_of_a_table_past_the_largest_allocation(vulkan, bits_equal) -> None:
    big, ids = _past_the_largest_allocation(600, 21)
    got, p = _streamed_run(big, ids, len(big) // 8 + 1, "staged")
    bits_equal(got, big[ids])
    assert not p.where and p.bytes_uploaded == len(ids) * ROW, p


def test_the_planner_streams_the_rows_only_where_that_is_cheaper(vulkan, bits_equal) -> None:
    from lazyfuel.backends.vulkan.executor import VulkanExecutor
    from lazyfuel.graph.touched import streamed_where_cheaper

    priors = {Backend.Cpu: host_prior(), Backend.Vulkan: kind_prior("discrete")}
    planner = Planner(default_registry(), [Backend.Vulkan, Backend.Cpu], costs=MeasuredCosts(priors=priors))
    executor = VulkanExecutor()
    big, few = _table(65536, 23), np.random.default_rng(24).integers(0, 65536, 2048).astype(np.uint32)
    block = streamed_where_cheaper(planner, SELECT, [big, few], Backend.Vulkan, executor)
    assert block is not None  # 64 MiB table, 2 MiB of rows: stream them, do not ship the table
    bits_equal(np.asarray(block), big[few])
    small, many = _table(64, 25), np.random.default_rng(26).integers(0, 64, 65536).astype(np.uint32)
    # a 64 KiB table and 64 MiB of rows: the table up once and the device's kernel costs less
    assert streamed_where_cheaper(planner, SELECT, [small, many], Backend.Vulkan, executor) is None
    both = Chain(2, (OpNode("IndexSelect", (0, 1), (("dim", 0),)),
                     OpNode("MaskedFill", (2, 1), (("value", 0.0),))), (3,))
    assert streamed_where_cheaper(planner, both, [big, few], Backend.Vulkan, executor) is None  # two nodes


def test_explain_on_the_device_says_the_rows_are_streamed_and_the_bytes_up(vulkan) -> None:
    rows = 65536
    ids = np.random.default_rng(27).integers(0, rows, 4096)
    y = lf.from_array(_table(rows, 28), chunks=(rows // 8, 256)).index_select(0, ids)
    text = lf.explain(y, device=True)
    assert "result kept on Vulkan: gathered on the host into page-locked staging" in text, text
    assert f"{4096 * ROW} bytes up, none down" in text and "no program runs" in text, text
    assert "result kept on" not in lf.explain(y)  # a host result: nothing is kept


def test_persisting_on_the_device_streams_the_rows_too(vulkan, bits_equal) -> None:
    from lazyfuel.backends.vulkan import get_pool
    from lazyfuel.backends.vulkan.transfer import in_mode

    table = _table(16384, 29)
    ids = np.random.default_rng(30).integers(0, len(table), 5000)
    with in_mode(get_pool(), "staged"), lf.profile() as p:
        kept = lf.from_array(table, chunks=(2048, 256)).index_select(0, ids).persist(device=True)
        assert not p.where and p.bytes_uploaded == len(ids) * ROW, p  # no program: the rows went up
        bits_equal(kept.compute(), table[ids])
        del kept
