"""Local chunk files are read with several spans in flight (`graph.file_spans`), placed from
mappings of the file or (where it cannot be mapped) copied: reads counted while under way, as
many at once as the read budget allows, every read finished before the call returns or raises,
only the touched rows copied out of a mapping; results bit-equal to numpy across formats, dtypes
and index orders, both ways."""

from __future__ import annotations

import os
import zlib

import numpy as np
import pytest
import zarr

import lazyfuel as lf
from lazyfuel.graph import byte_ranges, file_spans, stored

ROWS, CHUNK_ROWS, ROW_BYTES = 16_384, 8_192, 1024  # two chunks of 8 MiB: each read as two 4 MiB spans


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> file_spans.InFlight:
    """A fresh count of the span reads in flight (and a fresh budget count)."""
    monkeypatch.setattr(file_spans, "IN_FLIGHT", file_spans.InFlight())
    monkeypatch.setattr(stored, "BUDGET", stored.ByteBudget())
    return file_spans.IN_FLIGHT


@pytest.fixture(params=[True, False], ids=["mapped", "copied"])
def mapped(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Spans placed from mappings of their file (the default) or copied out of it by preadv."""
    monkeypatch.setattr(file_spans, "MAPPED", request.param)
    return request.param


def big_store(path, dtype: str, fmt: int, codec: str) -> np.ndarray:  # type: ignore[no-untyped-def]
    """A raw (or raw sharded) store of fresh random values whose chunks span several reads."""
    rng = np.random.default_rng(zlib.crc32(f"{dtype} {fmt} {codec}".encode()))
    cols = ROW_BYTES // np.dtype(dtype).itemsize
    data = (rng.integers(-2**14, 2**14, (ROWS, cols)) if np.dtype(dtype).kind in "iu"
            else rng.standard_normal((ROWS, cols))).astype(dtype)
    kw: dict = {"chunks": (CHUNK_ROWS, cols), "compressors": None}
    if codec == "sharded":
        kw = {"shards": (CHUNK_ROWS, cols), "chunks": (CHUNK_ROWS // 8, cols), "compressors": None}
    arr = zarr.create_array(store=str(path), shape=data.shape, dtype=data.dtype, zarr_format=fmt, **kw)
    arr[...] = data
    return data


def dense_rows(order: str, n: int = 9_000) -> np.ndarray:
    """`n` rows of the store, dense enough that every chunk is read as several 4 MiB spans."""
    idx = np.random.default_rng(len(order)).integers(0, ROWS, n)
    return {"sorted": np.sort(idx), "random": idx, "repeated": np.repeat(idx[: n // 3], 3)}[order]


CASES = [(fmt, codec, "float32", order) for fmt, codec in [(2, "raw"), (3, "raw"), (3, "sharded")]
         for order in ("sorted", "random", "repeated")]
CASES += [(3, "raw", dtype, "random") for dtype in (">i4", "int16", "float64")]
CASES += [(2, "raw", "<u2", "sorted")]


@pytest.mark.parametrize(("fmt", "codec", "dtype", "order"), CASES)
def test_dense_rows_read_with_spans_in_flight_are_bit_equal(tmp_path, bits_equal, counted, mapped, fmt, codec,
                                                            dtype, order):
    data = big_store(tmp_path / "t.zarr", dtype, fmt, codec)
    idx = dense_rows(order)
    x = lf.index_select(lf.from_zarr(tmp_path / "t.zarr"), 0, idx)
    bits_equal(x.compute(), data[idx].astype(data.dtype.newbyteorder("=")))
    assert counted.peak > 1  # reads overlapped
    assert counted.now == 0


def test_spans_in_flight_stay_within_the_read_budget(tmp_path, bits_equal, counted, mapped):
    data = big_store(tmp_path / "t.zarr", "float32", 3, "raw")
    idx = dense_rows("sorted")
    x = lf.index_select(lf.from_zarr(tmp_path / "t.zarr"), 0, idx)
    budget = byte_ranges.RANGE_BYTES  # room for one span at a time
    with lf.config(read_budget=budget):
        bits_equal(x.compute(), data[idx])
    assert counted.peak == 1
    assert 0 < stored.BUDGET.peak <= budget
    with lf.config(read_budget=2 * budget):
        bits_equal(x.compute(), data[idx])
    assert counted.peak == 2


def test_depth_is_bounded_by_spans_room_and_the_limit():
    spans = [(i * 4 << 20, (i + 1) * 4 << 20, slice(i, i + 1)) for i in range(10)]
    assert file_spans.depth_for(spans, 64 << 20) == byte_ranges.SPANS_IN_FLIGHT
    assert file_spans.depth_for(spans, 8 << 20) == 2
    assert file_spans.depth_for(spans, 1) == 1  # always one, however small the budget
    assert file_spans.depth_for(spans[:1], 64 << 20) == 1
    assert file_spans.depth_for(spans[:3], 12 << 20) == 3  # room for all of them
    assert file_spans.depth_for([], 64 << 20) == 0


def spans_of(nbytes: int, span: int) -> list[tuple[int, int, slice]]:
    return [(lo, min(lo + span, nbytes), slice(i, i + 1)) for i, lo in enumerate(range(0, nbytes, span))]


def test_a_file_shorter_than_its_spans_is_an_error_naming_it_and_leaves_no_read_running(tmp_path, counted,
                                                                                       mapped):
    path = tmp_path / "chunk"
    path.write_bytes(np.random.default_rng(1).bytes(10 << 20))
    placed: list[int] = []
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(file_spans.ShortFile, match=f"zarr chunk {path} is shorter than its rows"):
            file_spans.read_file_spans(fd, str(path), spans_of(16 << 20, 2 << 20),
                                       lambda lo, part, buf: placed.append(lo), 64 << 20)
    finally:
        os.close(fd)
    assert placed == [i * (2 << 20) for i in range(5)]  # the whole spans before the end, in order
    assert counted.now == 0


def test_a_failing_place_stops_the_reads_and_waits_for_those_under_way(tmp_path, counted, mapped):
    path = tmp_path / "chunk"
    want = np.random.default_rng(2).bytes(12 << 20)
    path.write_bytes(want)
    got: dict[int, bytes] = {}

    def place(lo: int, part: slice, buf: np.ndarray) -> None:
        if len(got) == 2:
            raise RuntimeError("placing failed")
        got[lo] = buf.tobytes()

    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(RuntimeError, match="placing failed"):
            file_spans.read_file_spans(fd, str(path), spans_of(12 << 20, 1 << 20), place, 64 << 20)
    finally:
        os.close(fd)
    assert counted.now == 0 and counted.peak > 1
    assert got == {lo: want[lo:lo + (1 << 20)] for lo in (0, 1 << 20)}


def rchar() -> int:
    """Bytes this process has moved through read calls (/proc/self/io), cached or not."""
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar"))


def test_mapped_spans_copy_only_the_touched_rows_out_of_the_page_cache(tmp_path, bits_equal, counted, mapped):
    data = big_store(tmp_path / "t.zarr", "float32", 3, "raw")
    idx = np.sort(np.random.default_rng(5).choice(ROWS, 2_000, replace=False))  # 1 row in 8
    x = lf.index_select(lf.from_zarr(tmp_path / "t.zarr"), 0, idx)
    before = rchar()
    bits_equal(x.compute(), data[idx])
    moved = rchar() - before
    assert counted.peak > 1 and counted.now == 0  # reads asked for ahead either way
    if mapped:  # the spans (the whole 16 MiB: gaps under GAP_BYTES read through) are never copied
        assert moved < 2 << 20
    else:
        assert moved >= ROWS * ROW_BYTES * 0.9


def test_a_file_that_cannot_be_mapped_is_read_by_copies(tmp_path, bits_equal, monkeypatch):
    data = big_store(tmp_path / "t.zarr", "float32", 3, "raw")
    idx = dense_rows("random")
    refused: list[int] = []

    def no_mapping(fd, window):  # what mmap says of a file system that cannot map its files
        refused.append(fd)
        raise OSError(19, "No such device")

    monkeypatch.setattr(file_spans, "_mapping", no_mapping)
    bits_equal(lf.index_select(lf.from_zarr(tmp_path / "t.zarr"), 0, idx).compute(), data[idx])
    assert len(refused) == 2  # once per chunk file, then copies


def test_windows_hold_at_most_the_limit_in_span_bytes_however_far_apart():
    spans = [(lo, lo + 1024, slice(i, i + 1)) for i, lo in enumerate(range(0, 64 << 20, 1 << 20))]
    windows = file_spans.windows_of(spans, 8 * 1024)
    assert [len(w) for w in windows] == [8] * 8
    assert [s for w in windows for s in w] == spans
    big = [(0, 5 << 20, slice(0, 1)), (5 << 20, 6 << 20, slice(1, 2))]
    assert [len(w) for w in file_spans.windows_of(big, 4 << 20)] == [1, 1]  # a longer span alone
    assert file_spans.windows_of([], 4 << 20) == []


@pytest.mark.parametrize("order", ["sorted", "random"])  # (repeated rows are copied from their first place)
def test_compute_puts_the_rows_read_straight_into_the_result(tmp_path, bits_equal, mapped, order):
    import tracemalloc

    data = big_store(tmp_path / "t.zarr", "float32", 3, "raw")
    idx = dense_rows(order, 12_000)
    x = lf.index_select(lf.from_zarr(tmp_path / "t.zarr"), 0, idx)
    x.compute()  # the process's one-time allocations (and kept span buffers) out of the count
    tracemalloc.start()
    try:
        got = x.compute()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    bits_equal(got, data[idx])
    # the result, index arrays and the graph (~5 MB here); each task's rows held apart before they
    # were copied into it added as much again as the distinct rows (9 MB sorted or random)
    assert peak - got.nbytes < got.nbytes / 2
