"""Transfers priced where the data is, on lavapipe (issue 18 item 3): `lf.explain` of a chain over a
persisted array shows no upload for its resident blocks and a download where the host reads them,
the planner's choice stays bit-exact, and `auto` with an empty judge cache picks a backend within
1.5x of the faster forced one on W1 and W2 shapes scaled to this machine."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

import lazyfuel as lf


@pytest.fixture(autouse=True)
def _empty_cache(tmp_path, monkeypatch, unmeasured_quietly):
    monkeypatch.setenv("LAZYFUEL_CACHE_DIR", str(tmp_path))  # an empty judge cache: the priors plan


def _resident(rows: int = 4096, chunk: int = 1024, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 256), dtype=np.float32)
    mask = rng.random((rows, 256)) < 0.5
    return (x, mask, lf.from_array(x, chunks=(chunk, 256)).persist(device=True),
            lf.from_array(mask, chunks=(chunk, 256)).persist(device=True))


def _links(text: str) -> list[str]:
    return re.findall(r"bytes per link: (.*)", text)


def test_explain_over_persisted_arrays_uploads_nothing_for_the_resident_inputs(vulkan, bits_equal):
    x, mask, lx, lmask = _resident()
    y = lx.masked_fill(lmask, -1.0)
    text = lf.explain(y)
    resident = "Vulkan up 0 B (0 array(s)), down 1.0 MiB (1 array(s)) (steps run on Vulkan)"
    assert _links(text) == [resident], text
    bits_equal(y.compute(), np.where(mask, np.float32(-1), x))
    ids = np.random.default_rng(1).permutation(1024).astype(np.int64)
    selected = lx.index_select(0, ids)  # one block of ids, read from the first resident block
    text = lf.explain(selected)
    assert "Vulkan up 4.0 KiB (1 array(s))" in text, text  # the ids alone: not the 1 MiB block
    bits_equal(selected.compute(), x[ids])


def test_a_resident_block_read_on_the_host_pays_its_download(bits_equal):
    x, mask, lx, _ = _resident(seed=2)
    host_mask = lf.from_array(mask, chunks=(1024, 256))
    y = lx.masked_fill(host_mask, 0.5)
    with lf.config(backend="cpu"):
        text = lf.explain(y)
        with lf.profile() as p:
            got = y.compute()
    assert _links(text) == ["Vulkan up 0 B (0 array(s)), down 1.0 MiB (1 array(s)) (steps run on Cpu)"], text
    bits_equal(got, np.where(mask, np.float32(0.5), x))
    assert p.bytes_downloaded == x.nbytes and p.bytes_uploaded == 0  # lf.profile counts each way


def test_a_result_wanted_on_the_device_is_not_downloaded(vulkan, bits_equal):
    x, mask, lx, lmask = _resident(seed=5)
    with lf.profile() as p:
        got = lx.masked_fill(lmask, 2.0).compute(device=True)
    assert p.bytes_downloaded == 0 and p.bytes_uploaded == 0
    bits_equal(np.asarray(got), np.where(mask, np.float32(2.0), x))


def _w1(mib: int, chunk_mib: int):
    """W1 (issue 18) scaled: select rows permuted inside each chunk, then fill the rows of a mask."""
    rows, chunk = mib * 2**20 // 4096, chunk_mib * 2**20 // 4096
    rng = np.random.default_rng(3)
    x = rng.standard_normal((rows, 1024), dtype=np.float32)
    idx = np.concatenate([s + rng.permutation(min(chunk, rows - s)) for s in range(0, rows, chunk)])
    mask = rng.random((rows, 1)) < 0.5
    y = lf.from_array(x, chunks=(chunk, 1024)).index_select(0, idx).masked_fill(
        lf.from_array(mask, chunks=(chunk, 1)), -1.0)
    return y, np.where(mask, np.float32(-1), x[idx])


def _w2(mib: int, ids: int):
    """W2 (issue 18) scaled: random rows of a (R, 256) f32 table in 8 chunks."""
    rows = mib * 2**20 // 1024
    rng = np.random.default_rng(4)
    table = rng.standard_normal((rows, 256), dtype=np.float32)
    picked = rng.integers(0, rows, ids, dtype=np.int64)
    return lf.from_array(table, chunks=(-(-rows // 8), 256)).index_select(0, picked), table[picked]


def _best(y, expected, backend: str, bits_equal) -> tuple[float, set[str]]:
    out = np.empty(y.shape, y.dtype)
    with lf.config(backend=backend):
        with lf.profile() as p:
            y.compute(out=out)
        bits_equal(out, expected)
        times = []
        for _ in range(3):
            start = time.perf_counter()
            y.compute(out=out)
            times.append(time.perf_counter() - start)
    return min(times), {b for b, _ in p.where}


@pytest.mark.parametrize("workload", ["w1", "w2"])
def test_auto_with_an_empty_judge_cache_picks_the_faster_backend(vulkan, workload, bits_equal):
    y, expected = _w1(16, 4) if workload == "w1" else _w2(32, 8192)
    timed = {b: _best(y, expected, b, bits_equal) for b in ("cpu", "vulkan")}
    _, where = _best(y, expected, "auto", bits_equal)
    (picked,) = [b for b, (_, ran) in timed.items() if ran == where]
    faster = min(seconds for seconds, _ in timed.values())
    assert timed[picked][0] <= 1.5 * faster, (where, timed)  # issue 18's acceptance: within 1.5x
