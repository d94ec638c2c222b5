"""Building and lowering a select is O(blocks + indices) (issue 16 item 6): no per-block step
looks at every chunk. Counted, not timed: the chunk extents that chunk-offset arithmetic
(`chunks.starts`) walks while a select with one index block per source chunk is built and
lowered grow linearly with the blocks (they grew with their square)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel.graph import chunks as ch

Build = Callable[[int], lf.Array]  # a select into that many source chunks


def walked(monkeypatch: pytest.MonkeyPatch, build: Build, blocks: int, lower: bool) -> int:
    """Chunk extents walked by `chunks.starts` while `build(blocks)` runs (and is lowered)."""
    count = [0]
    real = ch.starts

    def counting(axis_chunks):
        count[0] += len(axis_chunks)
        return real(axis_chunks)

    monkeypatch.setattr(ch, "starts", counting)
    y = build(blocks)
    assert len(y.chunks[0]) == blocks
    if lower:
        y.to_dask()
    monkeypatch.setattr(ch, "starts", real)
    return count[0]


def index_select(blocks: int) -> lf.Array:
    src = np.zeros((blocks * 8, 2), np.float32)
    rows = np.random.default_rng(blocks).integers(0, blocks * 8, blocks * 8)
    return lf.index_select(lf.from_array(src, chunks=(8, 2)), 0, rows)


def gather(blocks: int) -> lf.Array:
    src = np.zeros((blocks * 8, 3), np.float32)
    idx = np.random.default_rng(blocks).integers(0, blocks * 8, (blocks * 8, 3))
    return lf.gather(lf.from_array(src, chunks=(8, 3)), 0, idx)


@pytest.mark.parametrize("build", [index_select, gather])
@pytest.mark.parametrize("lower", [False, True], ids=["build", "build+lower"])
def test_chunk_arithmetic_grows_linearly_with_the_blocks(monkeypatch, build, lower):
    small, large = walked(monkeypatch, build, 250, lower), walked(monkeypatch, build, 1000, lower)
    assert large <= 6 * max(small, 1), (small, large)  # 4x the blocks; quadratic would be 16x
