"""zstd chunks decoded a window at a time (`lazyfuel.windowed`): the rows wanted come out
bit-equal, whatever windows they fall in; damaged bytes are a clear error; a select over a zstd
store never holds a decode buffer of the chunk's size."""

from __future__ import annotations

import numcodecs
import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel import windowed
from lazyfuel.graph import stored

pytestmark = pytest.mark.skipif(not windowed.zstd_available(), reason="no libzstd on this machine")

ROWS, COLS = 5000, 12


def chunk(seed: int) -> tuple[np.ndarray, np.ndarray]:
    data = np.random.default_rng(seed).integers(0, 50, (ROWS, COLS)).astype(np.float32)
    return data, np.frombuffer(numcodecs.Zstd(level=1).encode(data), np.uint8)


@pytest.mark.parametrize("window", [48, 1000, 4096, 2**20])  # under a row, odd, a few rows, whole
@pytest.mark.parametrize("pick", ["every", "edges", "random", "none"])
def test_rows_come_out_bit_equal_whatever_windows_they_fall_in(monkeypatch, bits_equal, window, pick):
    monkeypatch.setattr(windowed, "WINDOW_BYTES", window)
    monkeypatch.setattr(windowed, "_CONTEXTS", windowed._Contexts())
    data, compressed = chunk(1)
    per = max(1, window // (COLS * 4))
    rows = {"every": np.arange(ROWS), "edges": np.unique(np.r_[0, per - 1, per, ROWS - 1].clip(0, ROWS - 1)),
            "random": np.unique(np.random.default_rng(2).integers(0, ROWS, 300)),
            "none": np.arange(0)}[pick]
    out = np.empty((rows.size, COLS), np.float32)
    windowed.zstd_rows(compressed, COLS * 4, ROWS, rows, out)
    bits_equal(out, data[rows])


def test_damaged_or_wrong_sized_chunks_are_a_clear_error():
    _, compressed = chunk(3)
    out = np.empty((3, COLS), np.float32)
    rows = np.array([0, 10, ROWS - 1])
    with pytest.raises(ValueError, match="truncated"):
        windowed.zstd_rows(compressed[: compressed.size // 2], COLS * 4, ROWS, rows, out)
    with pytest.raises(ValueError, match="zstd cannot decode"):
        windowed.zstd_rows(np.full(100, 7, np.uint8), COLS * 4, ROWS, rows, out)
    with pytest.raises(ValueError, match=f"not {(ROWS + 1) * COLS * 4}"):
        windowed.zstd_rows(compressed, COLS * 4, ROWS + 1, rows, out)


def test_a_select_over_a_zstd_store_decodes_no_whole_chunk(tmp_path, bits_equal, monkeypatch):
    import zarr

    data = np.random.default_rng(4).standard_normal((4000, 16)).astype(np.float32)
    zarr.create_array(store=str(tmp_path / "z.zarr"), shape=data.shape, dtype="float32", chunks=(1000, 16),
                      compressors=zarr.codecs.ZstdCodec())[...] = data
    monkeypatch.setattr(windowed, "WINDOW_BYTES", 4096)  # 64 rows a window
    monkeypatch.setattr(stored, "SCRATCH", stored._Scratch(keep=4))
    idx = np.random.default_rng(5).integers(0, 4000, 900)
    x = lf.from_zarr(tmp_path / "z.zarr")
    bits_equal(lf.index_select(x, 0, idx).compute(), data[idx])
    bits_equal(lf.gather(x, 0, np.tile(idx[:, None], 16)).compute(), data[idx])
    assert stored.SCRATCH.free == []  # no buffer of a chunk's size was taken


def blosc_chunk(data: np.ndarray, **kw) -> np.ndarray:  # type: ignore[no-untyped-def]
    return np.frombuffer(numcodecs.Blosc(**kw).encode(data), np.uint8)


@pytest.mark.parametrize("dtype", ["float32", "int16", "float64", "uint8"])
@pytest.mark.parametrize("shuffle", [0, 1])
@pytest.mark.parametrize("window", [1000, 2**20])
@pytest.mark.parametrize("cols", [16, 12, 7])  # rows that divide blocks, and rows that straddle them
def test_blosc_rows_decode_only_touched_blocks_bit_equal(monkeypatch, bits_equal, dtype, shuffle, window,
                                                         cols):
    monkeypatch.setattr(windowed, "WINDOW_BYTES", window)
    data = np.random.default_rng(6).integers(0, 60, (ROWS, cols)).astype(dtype)
    compressed = blosc_chunk(data, cname="zstd", clevel=1, shuffle=shuffle, blocksize=4096)
    row_bytes = cols * data.itemsize
    some = np.unique(np.random.default_rng(7).integers(0, ROWS, 40))
    for rows in (some, np.arange(ROWS), np.array([ROWS - 1])):
        out = np.empty((rows.size, cols), dtype)
        windowed.blosc_rows(compressed, row_bytes, ROWS, rows, out)
        bits_equal(out, data[rows])


def test_blosc_rows_read_stored_chunks_and_refuse_what_they_do_not_know(bits_equal):
    noise = np.random.default_rng(8).integers(0, 256, (ROWS, COLS), dtype=np.uint8).view(np.uint8)
    rows = np.array([0, 17, ROWS - 1])
    out = np.empty((3, COLS), np.uint8)
    windowed.blosc_rows(blosc_chunk(noise, cname="zstd", shuffle=0), COLS, ROWS, rows, out)  # memcpyed
    bits_equal(out, noise[rows])
    data, _ = chunk(9)
    for kw in ({"cname": "lz4"}, {"cname": "zstd", "shuffle": 2}):  # lz4 blocks, bitshuffle
        with pytest.raises(windowed.BloscUnsupported):
            windowed.blosc_rows(blosc_chunk(data, **kw), COLS * 4, ROWS, rows, out.view(np.float32)[:, :3])
    whole = blosc_chunk(data, cname="zstd", shuffle=1)
    with pytest.raises(ValueError, match="holds"):  # truncated
        windowed.blosc_rows(whole[:-100], COLS * 4, ROWS, rows, np.empty((3, COLS), np.float32))
    damaged = whole.copy()
    damaged[16:20] = 255  # the first block's offset
    with pytest.raises(ValueError, match="damaged"):
        windowed.blosc_rows(damaged, COLS * 4, ROWS, rows, np.empty((3, COLS), np.float32))


def test_a_select_over_a_blosc_zstd_store_reads_only_touched_blocks(tmp_path, bits_equal, monkeypatch):
    import zarr

    data = np.random.default_rng(10).integers(0, 60, (4000, 16)).astype(np.float32)
    codec = zarr.codecs.BloscCodec(cname="zstd", clevel=1, shuffle="shuffle", blocksize=4096)
    zarr.create_array(store=str(tmp_path / "b.zarr"), shape=data.shape, dtype="float32", chunks=(1000, 16),
                      compressors=codec)[...] = data
    decoded = []
    real = windowed._blosc_blocks
    monkeypatch.setattr(windowed, "_blosc_blocks", lambda *a: decoded.extend(a[3].tolist()) or real(*a))
    monkeypatch.setattr(stored, "SCRATCH", stored._Scratch(keep=4))
    idx = np.array([5, 2100, 3999, 5])
    bits_equal(lf.index_select(lf.from_zarr(tmp_path / "b.zarr"), 0, idx).compute(), data[idx])
    assert len(decoded) == 3  # one 4 KiB block per distinct row, of 16 blocks a chunk
    assert stored.SCRATCH.free == []


@pytest.mark.parametrize("codec", ["zstd", "blosc-shuffle", "blosc", "blosc-memcpy"])
@pytest.mark.parametrize("places", ["scattered", "consecutive"])
@pytest.mark.parametrize("cols", [16, 7])  # rows that divide blocks, and rows that straddle them
def test_rows_decode_straight_into_their_places_in_a_larger_array(monkeypatch, bits_equal, codec, places,
                                                                  cols):
    monkeypatch.setattr(windowed, "WINDOW_BYTES", 1000)
    data = np.random.default_rng(11).integers(0, 60, (ROWS, cols)).astype(np.float32)
    if codec == "zstd":
        compressed, decode = np.frombuffer(numcodecs.Zstd(level=1).encode(data), np.uint8), windowed.zstd_rows
    else:
        noise = np.random.default_rng(12).standard_normal((ROWS, cols)).astype(np.float32)  # stored raw
        data = noise if codec == "blosc-memcpy" else data
        compressed = blosc_chunk(data, cname="zstd", clevel=1, shuffle=int(codec == "blosc-shuffle"),
                                 blocksize=4096)
        decode = windowed.blosc_rows
    rows = np.unique(np.r_[np.random.default_rng(13).integers(0, ROWS, 300), ROWS - 1])
    rng = np.random.default_rng(14)
    dest = rng.permutation(3 * ROWS)[:rows.size] if places == "scattered" else np.arange(rows.size) + 17
    out = np.full((3 * ROWS, cols), -1, np.float32)
    decode(compressed, cols * 4, ROWS, rows, out, dest)
    want = np.full_like(out, -1)
    want[dest] = data[rows]
    bits_equal(out, want)
