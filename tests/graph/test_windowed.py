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
