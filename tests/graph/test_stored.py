"""Selects over zarr sources read only what their indices touch (`graph.stored`): bit-equal to
numpy for v2 and v3 stores, raw, compressed and sharded; raw chunks read as byte ranges, every
touched chunk read once however often it is wanted; chunk bytes in flight bounded."""

from __future__ import annotations

import threading
import time
from collections import Counter

import numpy as np
import pytest
import zarr
from dask.core import flatten
from zarr.storage import LocalStore, WrapperStore

import lazyfuel as lf
from lazyfuel.graph import byte_ranges, stored
from lazyfuel.integrity import DamagedStoreError

SHAPE, CHUNKS = (1000, 24), (128, 24)


class CountingStore(WrapperStore):
    """A real local store that counts, per key, the calls and the bytes it returns."""

    def __init__(self, store: LocalStore) -> None:
        super().__init__(store)
        self.calls: Counter[str] = Counter()
        self.bytes: Counter[str] = Counter()
        self._lock = threading.Lock()

    async def get(self, key, prototype, byte_range=None):  # type: ignore[no-untyped-def]
        got = await self._store.get(key, prototype, byte_range)
        if not key.endswith(("zarr.json", ".zarray", ".zattrs", ".zgroup")):
            with self._lock:
                self.calls[key] += 1
                self.bytes[key] += 0 if got is None else len(got)
        return got

    def _with_store(self, store):  # type: ignore[no-untyped-def]
        return type(self)(store)


def table(seed: int, dtype: str = "float32") -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(SHAPE).astype(dtype)


def make_store(path, data: np.ndarray, fmt: int, codec: str, chunks=CHUNKS, fill_value=None):  # type: ignore[no-untyped-def]
    """A zarr store of `data` (not written when `fill_value` is given) with the given format and
    codec (raw, zstd, blosc, sharded)."""
    kw: dict = {"chunks": chunks, "fill_value": fill_value}
    if codec == "raw":
        kw["compressors"] = None
    elif codec == "zstd":
        kw["compressors"] = zarr.codecs.ZstdCodec() if fmt == 3 else {"id": "zstd"}
    elif codec == "blosc":
        kw["compressors"] = zarr.codecs.BloscCodec() if fmt == 3 else {"id": "blosc"}
    elif codec == "sharded":
        kw.update(shards=(chunks[0] * 2, chunks[1]), chunks=(chunks[0] // 8, chunks[1]), compressors=None)
    arr = zarr.create_array(store=str(path), shape=data.shape, dtype=data.dtype, zarr_format=fmt, **kw)
    if fill_value is None:
        arr[...] = data
    return arr


def rows_of(op: str, x: lf.Array, idx: np.ndarray) -> lf.Array:
    """Rows `idx` of `x` by `op`: an index_select, or a gather of whole rows (the same result)."""
    if op == "index_select":
        return lf.index_select(x, 0, idx)
    return lf.gather(x, 0, np.tile(idx[:, None], x.shape[1]))


CASES = [(2, "raw"), (2, "zstd"), (2, "blosc"), (3, "raw"), (3, "zstd"), (3, "blosc"), (3, "sharded")]


@pytest.mark.parametrize(("fmt", "codec"), CASES)
@pytest.mark.parametrize("order", ["random", "sorted"])
def test_index_select_from_zarr_is_bit_equal_to_numpy(tmp_path, bits_equal, fmt, codec, order):
    data = table(fmt * 10 + len(codec))
    make_store(tmp_path / "t.zarr", data, fmt, codec)
    idx = np.random.default_rng(3).integers(0, SHAPE[0], 700)  # repeats, several output blocks
    idx = np.sort(idx) if order == "sorted" else idx
    y = lf.index_select(lf.from_zarr(tmp_path / "t.zarr"), 0, idx)
    bits_equal(y.compute(), data[idx])
    bits_equal(y.to_dask().compute(), data[idx])  # the path to_zarr takes


@pytest.mark.parametrize(("fmt", "codec"), [(2, "raw"), (3, "raw"), (3, "zstd"), (3, "sharded")])
def test_index_select_along_a_chunked_second_axis_and_edge_chunks(tmp_path, bits_equal, fmt, codec):
    data = table(5)
    make_store(tmp_path / "t.zarr", data, fmt, codec, chunks=(96, 16))  # edge chunks on both axes
    x = lf.from_zarr(tmp_path / "t.zarr")
    rows = np.random.default_rng(4).integers(0, SHAPE[0], 300)
    cols = np.random.default_rng(5).integers(0, SHAPE[1], 40)
    bits_equal(lf.index_select(x, 0, rows).compute(), data[rows])
    bits_equal(lf.index_select(x, 1, cols).compute(), data[:, cols])
    bits_equal(lf.index_select(x, 0, [SHAPE[0] - 1]).compute(), data[[SHAPE[0] - 1]])


def test_big_endian_and_integer_stores_come_out_native(tmp_path, bits_equal):
    data = np.random.default_rng(6).integers(-2**31, 2**31, SHAPE).astype(">i4")
    zarr.create_array(store=str(tmp_path / "be.zarr"), shape=SHAPE, dtype=">i4", chunks=CHUNKS,
                      zarr_format=2, compressors=None)[...] = data
    idx = np.random.default_rng(7).integers(0, SHAPE[0], 200)
    got = lf.index_select(lf.from_zarr(tmp_path / "be.zarr"), 0, idx).compute()
    assert got.dtype == np.dtype("<i4")
    bits_equal(got, data[idx].astype("<i4"))


@pytest.mark.parametrize(("fmt", "codec"), [(2, "raw"), (3, "raw"), (2, "zstd"), (3, "blosc")])
def test_chunks_never_written_read_as_the_fill_value(tmp_path, bits_equal, fmt, codec):
    arr = make_store(tmp_path / "f.zarr", np.zeros(SHAPE, np.float32), fmt, codec, fill_value=2.5)
    arr[:128] = 1.0  # chunk 0 written, the others not stored at all
    idx = np.array([0, 300, 5, 999, 300])
    bits_equal(lf.index_select(lf.from_zarr(tmp_path / "f.zarr"), 0, idx).compute(), arr[...][idx])


def counted_select(path, idx: np.ndarray, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """`index_select(from_zarr(path), 0, idx).compute()` through a `CountingStore`, no gaps merged:
    the store (its counts) and the result."""
    monkeypatch.setattr(byte_ranges, "GAP_BYTES", 0)  # where `coalesced` reads it
    store = CountingStore(LocalStore(str(path), read_only=True))
    return store, lf.index_select(lf.from_zarr(store), 0, idx).compute()


def test_raw_chunks_are_read_as_the_byte_ranges_of_the_touched_rows(tmp_path, bits_equal, monkeypatch):
    data = table(8)
    make_store(tmp_path / "t.zarr", data, 3, "raw", chunks=(500, 24))  # 48 kB chunks, rows of 96 B
    idx = np.array([3, 499, 700, 3])  # no gap merged: three ranges
    store, got = counted_select(tmp_path / "t.zarr", idx, monkeypatch)
    bits_equal(got, data[idx])
    row = SHAPE[1] * 4
    assert sum(store.bytes.values()) == 3 * row  # three distinct rows, each read once
    assert store.calls == Counter({"c/0/0": 2, "c/1/0": 1})


@pytest.mark.parametrize("codec", ["zstd", "sharded"])
@pytest.mark.parametrize("op", ["index_select", "gather"])
def test_each_touched_chunk_is_read_once_however_often_it_is_wanted(tmp_path, bits_equal, codec, op):
    data = table(9)
    make_store(tmp_path / "t.zarr", data, 3, codec)
    store = CountingStore(LocalStore(str(tmp_path / "t.zarr"), read_only=True))
    idx = np.tile(np.array([5, 130, 131, 900, 5]), 200)  # 1000 ids over several output blocks
    x = lf.from_zarr(store)
    bits_equal(rows_of(op, x, idx).compute(), data[idx])
    if codec == "zstd":
        assert store.calls == Counter({"c/0/0": 1, "c/1/0": 1, "c/7/0": 1})  # untouched chunks: never
    else:  # shards of 256 rows: the index and the touched rows of shards 0 and 3 only
        assert sorted(store.calls) == ["c/0/0", "c/3/0"]
        assert sum(store.bytes.values()) < data.nbytes / 4


def test_raw_sharded_stores_read_the_touched_rows_through_the_shard_index(tmp_path, bits_equal,
                                                                          monkeypatch):
    data = table(11)
    make_store(tmp_path / "t.zarr", data, 3, "sharded")  # shards of 256 rows, raw inner chunks of 16
    idx = np.array([300, 17, 1, 300])
    store, got = counted_select(tmp_path / "t.zarr", idx, monkeypatch)
    bits_equal(got, data[idx])
    index = 16 * 16 + 4  # 16 inner chunks of (offset, length) uint64, and a crc32c
    assert store.bytes == Counter({"c/0/0": index + 2 * SHAPE[1] * 4, "c/1/0": index + SHAPE[1] * 4})


def test_the_dask_graph_grows_with_blocks_and_touched_chunks_not_indices(tmp_path):
    make_store(tmp_path / "t.zarr", table(10), 3, "zstd")
    x = lf.from_zarr(tmp_path / "t.zarr")
    idx = np.random.default_rng(1).integers(0, SHAPE[0], 50_000)
    graph = lf.index_select(x, 0, idx).to_dask().__dask_graph__()
    blocks, chunks = -(-idx.size // CHUNKS[0]), -(-SHAPE[0] // CHUNKS[0])
    assert len(graph) <= blocks + 2 * chunks + 2  # output blocks, read tasks, the source's keys


@pytest.mark.parametrize(("fmt", "codec"), [(2, "raw"), (3, "zstd"), (3, "blosc"), (3, "sharded")])
def test_reads_hold_no_more_than_the_read_budget(tmp_path, bits_equal, fmt, codec, monkeypatch):
    data = table(20)
    make_store(tmp_path / "t.zarr", data, fmt, codec)
    monkeypatch.setattr(stored, "BUDGET", stored.ByteBudget())
    idx = np.random.default_rng(21).integers(0, SHAPE[0], 900)
    x = lf.from_zarr(tmp_path / "t.zarr")
    select, gather = lf.index_select(x, 0, idx), lf.gather(x, 0, np.tile(idx[:, None], SHAPE[1]))
    with lf.config(read_budget="4KiB"):  # less than one chunk (12 KiB): one read at a time
        bits_equal(select.compute(), data[idx])
        bits_equal(gather.compute(), data[idx])
        bits_equal(select.to_dask().compute(), data[idx])
        select.to_zarr(tmp_path / "out.zarr")
    bits_equal(lf.from_zarr(tmp_path / "out.zarr").compute(), data[idx])
    assert 0 < stored.BUDGET.peak <= 4096
    with lf.config(read_budget=0.5):
        assert stored.read_budget() == stored.host_memory() // 2


@pytest.mark.parametrize(("fmt", "codec"), [(2, "raw"), (3, "blosc"), (3, "sharded")])
def test_to_zarr_of_a_select_over_a_zarr_store_is_bit_equal(tmp_path, bits_equal, fmt, codec):
    data = table(12)
    make_store(tmp_path / "t.zarr", data, fmt, codec)
    idx = np.random.default_rng(13).integers(0, SHAPE[0], 500)
    y = lf.index_select(lf.from_zarr(tmp_path / "t.zarr"), 0, idx)
    y.to_zarr(tmp_path / "out.zarr")
    bits_equal(zarr.open_array(str(tmp_path / "out.zarr"), mode="r")[...], data[idx])
    bits_equal(lf.index_select(y, 0, np.arange(499, -1, -1)).compute(), data[idx[::-1]])  # not direct


@pytest.mark.parametrize(("fmt", "codec"), [(2, "raw"), (3, "raw"), (3, "zstd"), (3, "sharded")])
def test_to_zarr_reads_rows_straight_into_blocks_each_waiting_for_its_own_reads(tmp_path, bits_equal, fmt,
                                                                                codec):
    data = table(14)
    make_store(tmp_path / "t.zarr", data, fmt, codec)
    rng = np.random.default_rng(15)
    for idx in (np.sort(rng.integers(0, SHAPE[0], 900)), rng.integers(0, SHAPE[0], 900),
                np.repeat(np.sort(rng.integers(0, SHAPE[0], 300)), 3)):
        y = lf.index_select(lf.from_zarr(tmp_path / "t.zarr"), 0, idx)
        arr = stored.direct_array(y._node)
        assert arr.chunks == y.chunks
        graph = dict(arr.__dask_graph__())
        reads = [k for k in graph if k[0].startswith("lazyfuel-zarr-rows-")]
        waits = [len(graph[k][3]) for k in flatten(arr.__dask_keys__())]
        if bool(np.all(np.diff(idx) >= 0)):  # sorted: each block waits for the few chunks its rows lie in
            assert max(waits) < len(reads) and sum(waits) < 2 * len(reads)
        bits_equal(arr.compute(), data[idx])
        y.to_zarr(tmp_path / "out.zarr", overwrite=True)
        bits_equal(lf.from_zarr(tmp_path / "out.zarr").compute(), data[idx])
    assert stored.direct_array(lf.index_select(y, 0, np.arange(10))._node) is None  # not straight over zarr


def gather_ids(seed: int, shape: tuple[int, ...], extent: int, order: str) -> np.ndarray:
    """Gather indices of `shape` into an axis of `extent`: random, sorted down the axis, or
    repeated (few distinct rows, each wanted many times)."""
    rng = np.random.default_rng(seed)
    if order == "repeated":
        return rng.choice(rng.integers(0, extent, 7), shape)
    idx = rng.integers(0, extent, shape)
    return np.sort(idx, axis=0) if order == "sorted" else idx


@pytest.mark.parametrize(("fmt", "codec"), CASES)
@pytest.mark.parametrize("order", ["random", "sorted", "repeated"])
def test_gather_from_zarr_is_bit_equal_to_numpy(tmp_path, bits_equal, fmt, codec, order):
    data = table(fmt * 20 + len(codec))
    make_store(tmp_path / "t.zarr", data, fmt, codec)
    x = lf.from_zarr(tmp_path / "t.zarr")
    rows = gather_ids(14, (700, SHAPE[1]), SHAPE[0], order)  # several output blocks
    bits_equal(lf.gather(x, 0, rows).compute(), np.take_along_axis(data, rows, 0))
    bits_equal(lf.gather(x, 0, rows).to_dask().compute(), np.take_along_axis(data, rows, 0))  # to_zarr's path
    cols = gather_ids(16, (SHAPE[0], 30), SHAPE[1], order)  # along the second axis
    bits_equal(lf.gather(x, 1, cols).compute(), np.take_along_axis(data, cols, 1))


def test_gather_reads_only_the_byte_ranges_of_the_touched_rows(tmp_path, bits_equal, monkeypatch):
    data = table(17)
    make_store(tmp_path / "t.zarr", data, 3, "raw", chunks=(500, 24))  # 48 kB chunks, rows of 96 B
    idx = np.tile(np.array([[3], [499], [700], [3]]), (50, SHAPE[1]))  # 200 x 24 ids, 3 distinct rows
    idx[::7, 5] = 3
    monkeypatch.setattr(byte_ranges, "GAP_BYTES", 0)  # where `coalesced` reads it
    store = CountingStore(LocalStore(str(tmp_path / "t.zarr"), read_only=True))
    bits_equal(lf.gather(lf.from_zarr(store), 0, idx).compute(), np.take_along_axis(data, idx, 0))
    assert sum(store.bytes.values()) == 3 * SHAPE[1] * 4  # three distinct rows, each read once
    assert store.calls == Counter({"c/0/0": 2, "c/1/0": 1})


def test_the_graph_of_a_million_id_gather_builds_in_well_under_a_second(tmp_path):
    zarr.create_array(store=str(tmp_path / "t.zarr"), shape=(2_000_000, 4), dtype="float32",
                      chunks=(65_536, 4), compressors=None)
    x = lf.from_zarr(tmp_path / "t.zarr")
    rng = np.random.default_rng(19)
    for make in (lambda: lf.index_select(x, 0, rng.integers(0, 2_000_000, 1_000_000)),
                 lambda: lf.gather(x, 0, rng.integers(0, 2_000_000, (250_000, 4)))):
        y = make()
        start = time.perf_counter()
        graph = y.to_dask().__dask_graph__()
        took = time.perf_counter() - start
        assert took < 0.5, f"{took:.2f} s"
        assert len(graph) <= 2 * 31 + 2 * len(y.chunks[0]) + 4  # source keys, read tasks, output blocks


@pytest.mark.parametrize(("fmt", "codec", "op"), [(2, "raw", "index_select"), (3, "zstd", "index_select"),
                                                  (3, "sharded", "index_select"), (3, "zstd", "gather")])
def test_to_zarr_of_a_select_larger_than_the_read_budget_writes_it_in_slabs(tmp_path, bits_equal, fmt, codec,
                                                                            op, monkeypatch):
    import tracemalloc

    from lazyfuel import zarr_io

    data = np.random.default_rng(22).standard_normal((4000, 128)).astype(np.float32)  # chunks of 128 KiB
    make_store(tmp_path / "t.zarr", data, fmt, codec, chunks=(256, 128))
    idx = np.random.default_rng(23).integers(0, data.shape[0], 24_000)  # random: blocks want every chunk
    x = lf.from_zarr(tmp_path / "t.zarr")
    y = rows_of(op, x, idx)
    written = []
    real = zarr_io._write_block

    def write_block(block, z, offset, block_info=None):  # type: ignore[no-untyped-def]
        written.append(offset)
        return real(block, z, offset, block_info)

    monkeypatch.setattr(zarr_io, "_write_block", write_block)
    nbytes, blocks = idx.size * data.shape[1] * 4, len(y.chunks[0])  # 12 MB
    y.to_zarr(tmp_path / "warm.zarr")  # imports and caches out of the measurement
    peaks = []
    for budget, slabs in ((nbytes, 1), (nbytes // 10, -(-blocks // (blocks // 10)))):
        written.clear()
        tracemalloc.start()
        with lf.config(read_budget=budget):
            y.to_zarr(tmp_path / "out.zarr", overwrite=True)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert len(set(written)) == slabs and len(written) == blocks
        bits_equal(lf.from_zarr(tmp_path / "out.zarr").compute(), data[idx])  # checksums verified too
        peaks.append(peak)
    assert peaks[0] > nbytes and peaks[1] < peaks[0] / 2  # the whole result held, then not
    if op == "index_select":  # a gather also holds its plan: int64 offsets, several per element
        assert peaks[1] < nbytes / 3


@pytest.mark.parametrize("fmt", [2, 3])
def test_stores_lazyfuel_wrote_raw_are_read_as_byte_ranges_for_a_few_rows(tmp_path, bits_equal, fmt,
                                                                          monkeypatch):
    data = table(24)
    lf.from_array(data, chunks=(200, 24)).to_zarr(tmp_path / "w.zarr", compressors=None, zarr_format=fmt)
    monkeypatch.setattr(byte_ranges, "GAP_BYTES", 0)  # where `coalesced` reads it
    store = CountingStore(LocalStore(str(tmp_path / "w.zarr"), read_only=True))
    x = lf.from_zarr(store)
    few = np.array([3, 450, 7, 3])  # under 1/8 of a chunk's rows: byte ranges
    bits_equal(lf.index_select(x, 0, few).compute(), data[few])
    row = SHAPE[1] * 4
    assert sum(store.bytes.values()) == 3 * row
    bits_equal(lf.gather(x, 0, np.tile(few[:, None], SHAPE[1])).compute(), data[few])
    many = np.random.default_rng(25).permutation(SHAPE[0])  # every row: whole chunks, verified
    store.bytes.clear()
    bits_equal(lf.index_select(x, 0, many).compute(), data[many])
    assert sum(store.bytes.values()) == 5 * (200 * row + 4)


def flip_byte(file, at: int) -> None:  # type: ignore[no-untyped-def]
    """Flip the bits of byte `at` of `file` in place."""
    with open(file, "r+b") as f:
        f.seek(at)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0xFF]))


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_damaged_chunk_of_a_raw_store_lazyfuel_wrote_is_an_error_on_a_partial_read(tmp_path, fmt):
    data = table(26)
    path = tmp_path / "w.zarr"
    lf.from_array(data, chunks=(200, 24)).to_zarr(path, compressors=None, zarr_format=fmt)
    key = {2: "1.0", 3: "c/1/0"}[fmt]
    few, many = np.array([210, 300]), np.arange(200, 400)
    flip_byte(path / key, 100 * SHAPE[1] * 4 + 5)  # a flipped byte inside a row read: whole reads catch it
    with pytest.raises(DamagedStoreError, match=r"chunk \(1, 0\)"):
        lf.index_select(lf.from_zarr(path), 0, many).compute()
    (path / key).write_bytes((path / key).read_bytes()[:-10])  # truncated
    with pytest.raises(DamagedStoreError, match=r"chunk \(1, 0\).*truncated or was replaced"):
        lf.index_select(lf.from_zarr(path), 0, few).compute()
    (path / key).unlink()
    with pytest.raises(DamagedStoreError, match=r"chunk \(1, 0\).*is missing"):
        lf.index_select(lf.from_zarr(path), 0, few).compute()


def read_call_bytes() -> int:
    """Bytes this process has moved through read calls (/proc/self/io `rchar`)."""
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar"))


@pytest.mark.parametrize("fmt", [2, 3])
def test_many_rows_of_a_local_raw_store_lazyfuel_wrote_are_verified_over_a_mapping(tmp_path, bits_equal, fmt):
    data = table(28)
    path = tmp_path / "w.zarr"
    lf.from_array(data, chunks=(200, 24)).to_zarr(path, compressors=None, zarr_format=fmt)
    many = np.random.default_rng(29).integers(0, SHAPE[0], 900)  # whole chunks, verified
    before = read_call_bytes()
    bits_equal(lf.index_select(lf.from_zarr(path), 0, many).compute(), data[many])
    assert read_call_bytes() - before < data.nbytes // 2  # not read through zarr's copies
    key = {2: "{}.0", 3: "c/{}/0"}[fmt]
    first, second = (path / key.format(1)).read_bytes(), (path / key.format(2)).read_bytes()
    (path / key.format(1)).write_bytes(second)  # a whole chunk swapped: its own crc32c holds
    with pytest.raises(DamagedStoreError, match=r"chunk \(1, 0\).*does not hold what lazyfuel wrote there"):
        lf.index_select(lf.from_zarr(path), 0, many).compute()
    damaged = bytearray(first)
    damaged[100 * SHAPE[1] * 4 + 5] ^= 0xFF  # a flipped byte inside the values
    (path / key.format(1)).write_bytes(bytes(damaged))
    with pytest.raises(DamagedStoreError, match=r"chunk \(1, 0\).*cannot be decoded.*truncated or corrupted"):
        lf.index_select(lf.from_zarr(path), 0, many).compute()
    (path / key.format(1)).write_bytes(first[:-8])
    with pytest.raises(DamagedStoreError, match=r"chunk \(1, 0\).*truncated or was replaced"):
        lf.index_select(lf.from_zarr(path), 0, many).compute()


def test_a_store_lazyfuel_wrote_is_verified_where_the_ranges_would_hold_most_of_a_chunk(tmp_path, bits_equal):
    data = table(30)  # rows of 96 B: 20 rows of a 200-row chunk merge into ranges over most of it
    path = tmp_path / "w.zarr"
    lf.from_array(data, chunks=(200, 24)).to_zarr(path, compressors=None)
    spread = np.arange(200, 400, 10)  # 1/10 of the rows (the rule of 1/8 of them read ranges)
    flip_byte(path / "c/1/0", 5 * SHAPE[1] * 4 + 1)  # inside row 205, which no index reads
    with pytest.raises(DamagedStoreError, match=r"chunk \(1, 0\).*cannot be decoded"):
        lf.index_select(lf.from_zarr(path), 0, spread).compute()

    wide = np.random.default_rng(31).standard_normal((64, 16_384)).astype(np.float32)  # rows of 64 KiB
    lf.from_array(wide, chunks=(32, 16_384)).to_zarr(tmp_path / "wide.zarr", compressors=None)
    apart = np.arange(0, 32, 4)  # 1/4 of the rows, 192 KiB apart: ranges over 1/4 of the chunk
    flip_byte(tmp_path / "wide.zarr/c/0/0", 2 * 16_384 * 4 + 7)  # inside row 2, which no index reads
    bits_equal(lf.index_select(lf.from_zarr(tmp_path / "wide.zarr"), 0, apart).compute(), wide[apart])


def test_a_slab_write_that_fails_part_way_publishes_nothing(tmp_path, bits_equal, monkeypatch):
    from lazyfuel import zarr_io

    data = table(27)
    make_store(tmp_path / "t.zarr", data, 3, "raw")
    old = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    lf.from_array(old).to_zarr(tmp_path / "out.zarr")
    real = zarr_io._write_block

    def write_block(block, z, offset, block_info=None):  # type: ignore[no-untyped-def]
        if offset[0] > 0:  # the second slab on
            raise OSError("disk full")
        return real(block, z, offset, block_info)

    monkeypatch.setattr(zarr_io, "_write_block", write_block)
    idx = np.random.default_rng(28).integers(0, SHAPE[0], 2000)
    y = lf.index_select(lf.from_zarr(tmp_path / "t.zarr"), 0, idx)
    with lf.config(read_budget=4 * 128 * SHAPE[1] * 4), pytest.raises(OSError, match="disk full"):
        y.to_zarr(tmp_path / "out.zarr", overwrite=True)
    bits_equal(lf.from_zarr(tmp_path / "out.zarr").compute(), old)  # the old store, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.zarr", "t.zarr"]  # no temporary left


def test_compute_of_direct_reads_runs_on_at_least_four_threads_unless_told(tmp_path, bits_equal, monkeypatch):
    """Direct store reads wait on the disk, not the CPU: compute() runs them on as many dask
    threads as the file reads' pool has (`file_spans.READ_THREADS`: max(4, CPUs); here 2 CPUs
    as dask counts them); a thread count the caller gives wins."""
    import dask

    data = np.random.default_rng(31).standard_normal((4096, 16)).astype(np.float32)
    make_store(tmp_path / "t.zarr", data, 3, "raw", chunks=(64, 16))  # 64 source blocks
    idx = np.random.default_rng(32).integers(0, data.shape[0], 3000)
    seen: set[str] = set()
    real = stored.scatter_rows

    def scatter_rows(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.add(threading.current_thread().name)
        time.sleep(0.002)  # as a disk read would: other threads take tasks meanwhile
        return real(*args, **kwargs)

    monkeypatch.setattr(stored, "scatter_rows", scatter_rows)
    monkeypatch.setattr(dask.system, "CPU_COUNT", 2)
    y = lf.index_select(lf.from_zarr(tmp_path / "t.zarr"), 0, idx)
    bits_equal(y.compute(), data[idx])
    assert len(seen) >= 4
    seen.clear()
    bits_equal(y.compute(num_workers=1), data[idx])
    assert len(seen) == 1


@pytest.mark.parametrize("chunk_rows", [65536, 70000])  # rows as 16-bit sort keys, and too many for them
def test_direct_reads_group_random_repeated_ids_by_chunk_bit_equal(tmp_path, bits_equal, chunk_rows):
    data = np.random.default_rng(21).standard_normal((2 * chunk_rows + 123, 2)).astype(np.float32)
    make_store(tmp_path / "t.zarr", data, 3, "raw", chunks=(chunk_rows, 2))
    idx = np.random.default_rng(22).integers(0, data.shape[0], 5000)
    idx[:3] = [data.shape[0] - 1, 65535, chunk_rows]  # the last row, a 16-bit edge, a chunk's first
    bits_equal(lf.index_select(lf.from_zarr(tmp_path / "t.zarr"), 0, idx).compute(), data[idx])
    keys = np.random.default_rng(23).integers(0, 40, 1000)
    order = stored.stable_order(keys, 40)
    assert np.array_equal(order, np.argsort(keys, kind="stable"))


@pytest.mark.parametrize("codec", ["zstd", "blosc"])
@pytest.mark.parametrize("order", ["random", "sorted"])
def test_compressed_rows_decode_straight_into_the_result(tmp_path, bits_equal, monkeypatch, codec, order):
    from lazyfuel import windowed

    data = table(31)
    make_store(tmp_path / "t.zarr", data, 3, codec)
    idx = np.random.default_rng(32).integers(0, SHAPE[0], 900)  # repeats too
    idx = np.sort(idx) if order == "sorted" else idx
    targets = []
    name = "zstd_rows" if codec == "zstd" else "blosc_rows"
    real = getattr(windowed, name)
    monkeypatch.setattr(windowed, name, lambda *a: targets.append(a[4]) or real(*a))
    result = np.empty((idx.size, SHAPE[1]), np.float32)
    y = lf.index_select(lf.from_zarr(tmp_path / "t.zarr"), 0, idx)
    y.compute(out=result)
    bits_equal(result, data[idx])
    assert len(targets) == len(np.unique(idx // CHUNKS[0])) and all(t is result for t in targets)
    wide = np.zeros((idx.size, 2 * SHAPE[1]), np.float32)
    y.compute(out=wide[:, ::2])  # not C-contiguous: decoded apart, then copied
    bits_equal(wide[:, ::2], data[idx])
    bits_equal(wide[:, 1::2], np.zeros_like(data[idx]))
