"""Host copies into and out of staging (`hostcopy.py`): large ones split over the copy threads,
bit for bit; the thread count from `LAZYFUEL_COPY_THREADS`, a bad value named."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from lazyfuel import hostcopy


@pytest.mark.parametrize("nbytes", [1 << 20, hostcopy.SPLIT_MIN + 12345], ids=["small", "split"])
def test_copies_are_exact(nbytes):
    src = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
    dst = np.zeros(nbytes + 64, np.uint8)
    hostcopy.copy(dst[32:32 + nbytes], src)
    assert dst[32:32 + nbytes].tobytes() == src.tobytes()
    assert not dst[:32].any() and not dst[32 + nbytes:].any()  # nothing written outside


def test_large_copies_run_on_several_threads(monkeypatch):
    monkeypatch.setenv(hostcopy.ENV, "4")
    monkeypatch.setattr(hostcopy, "_pool", None)
    seen, copyto = set(), np.copyto

    def spy(dst, src):
        seen.add(threading.current_thread().name)
        copyto(dst, src)
    monkeypatch.setattr(np, "copyto", spy)
    src = np.random.default_rng(1).integers(0, 256, hostcopy.SPLIT_MIN, dtype=np.uint8)
    dst = np.empty_like(src)
    hostcopy.copy(dst, src)
    assert dst.tobytes() == src.tobytes()
    assert seen and all(name.startswith("lazyfuel-copy") for name in seen)
    monkeypatch.setenv(hostcopy.ENV, "1")  # one thread: the caller copies it all
    seen.clear()
    hostcopy.copy(dst, src)
    assert not seen


def test_a_bad_thread_count_is_named(monkeypatch):
    monkeypatch.setenv(hostcopy.ENV, "many")
    with pytest.raises(ValueError, match="LAZYFUEL_COPY_THREADS='many'; expected a number of threads"):
        hostcopy.workers()


def test_cpu_index_select_of_large_blocks_takes_rows_on_the_copy_pool(monkeypatch):
    """The Cpu executor's index_select step (W2's random gather when the planner picks the Cpu)
    takes a large result's rows on several threads, bit-equal to numpy, fresh and into `out`."""
    from lazyfuel.backends.cpu.kernels import index_select_step

    monkeypatch.setattr(hostcopy, "_pool", None)  # made only when a copy is split
    rng = np.random.default_rng(5)
    table = rng.standard_normal((1 << 16, 256), dtype=np.float32)  # 64 MiB
    rows = rng.integers(0, len(table), 1 << 16).astype(np.uint32)
    params = {"outer_count": 1, "source_dim_size": len(table), "n_indices": len(rows), "inner_count": 256}
    got = index_select_step(table, rows, **params)
    assert got.tobytes() == table[rows].tobytes() and got.flags.c_contiguous
    assert hostcopy._pool is not None, "the rows were taken on the copy pool"
    into = np.full((1, len(rows), 256), np.nan, np.float32)
    assert index_select_step(table, rows, **params, out=into) is into
    assert into.tobytes() == table[rows].tobytes()


def test_take_rows_splits_from_the_size_it_is_given(monkeypatch):
    """`take_rows(split_min=, piece=)`: a small result cut into runs of `piece` bytes on the copy
    pool (what the streamed pieces of `backends/vulkan/streamed.py` ask for), bit-equal, in
    numpy's `clip` mode as in `raise`."""
    seen, take = set(), np.take

    def spy(*args, **kwargs):
        seen.add(threading.current_thread().name)
        return take(*args, **kwargs)
    monkeypatch.setenv(hostcopy.ENV, "4")
    monkeypatch.setattr(hostcopy, "_pool", None)
    monkeypatch.setattr(np, "take", spy)
    rng = np.random.default_rng(6)
    table = rng.standard_normal((4096, 64), dtype=np.float32)
    rows = rng.integers(0, len(table), 2048)  # 512 KiB of rows: far under SPLIT_MIN
    for mode in ("raise", "clip"):
        out = np.full((len(rows), 64), np.nan, np.float32)
        assert hostcopy.take_rows(table, rows, out, mode, split_min=1 << 16, piece=1 << 16) is out
        assert out.tobytes() == table[rows].tobytes()
    assert any(name.startswith("lazyfuel-copy") for name in seen), seen
    seen.clear()
    hostcopy.take_rows(table, rows, np.empty((len(rows), 64), np.float32))  # the default: one thread
    assert not any(name.startswith("lazyfuel-copy") for name in seen), seen
