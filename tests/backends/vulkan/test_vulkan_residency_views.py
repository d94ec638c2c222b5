"""Views of resident blocks read where the blocks lie (`residency.ResidentView`), on the real pool.

A program reading a `persist(device=True)` block through a view (a persisted (N, 1) mask
broadcast to its data's shape, a transpose, a reversal) binds the block's memory with the view's
layout: no download and no upload (`lf.profile`), where main took a host copy of the block and
uploaded the view again every compute. Views that start past the block's first element (an
offset slice) still take the host copy. Every result bit-equal to numpy on fresh random data.
"""

from __future__ import annotations

import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel.backends.vulkan.residency import ResidentBlock, ResidentView
from lazyfuel.layout import Layout

RNG = np.random.default_rng()
ROWS, COLS, CHUNK = 512, 32, 128


@pytest.fixture
def table():
    a = RNG.standard_normal((ROWS, COLS)).astype(np.float32)
    return a, lf.from_array(a, chunks=(CHUNK, COLS)).persist(device=True)


def test_a_persisted_row_mask_is_broadcast_where_it_lies(vulkan, table):
    a, x = table
    idx = np.concatenate([lo + RNG.permutation(CHUNK) for lo in range(0, ROWS, CHUNK)])
    mask = RNG.random((ROWS, 1)) < 0.5
    y = x.index_select(0, idx).masked_fill(lf.from_array(mask, chunks=(CHUNK, 1)).persist(device=True), -1.0)
    y.persist(device=True)  # the indices go up once (kept_indices)
    with lf.profile() as p:
        out = y.persist(device=True)
    assert p.bytes_uploaded == 0 and p.bytes_downloaded == 0, p
    assert np.asarray(out.compute()).tobytes() == np.where(mask, np.float32(-1), a[idx]).tobytes()


@pytest.mark.parametrize("view", ["T", "reversed", "columns reversed", "offset rows"])
def test_views_of_resident_blocks_feed_programs_bit_exact(vulkan, table, view):
    a, x = table
    pick = {"T": (lambda v: v.T), "reversed": (lambda v: v[::-1]),
            "columns reversed": (lambda v: v[:, ::-1]), "offset rows": (lambda v: v[3:])}[view]
    src, want_src = pick(x), pick(a)
    ids = RNG.integers(0, want_src.shape[1], 40)
    got = np.asarray(src.index_select(1, ids).compute(device=True))
    assert got.tobytes() == np.ascontiguousarray(want_src[:, ids]).tobytes()
    assert np.asarray(src.compute(device=True)).tobytes() == np.ascontiguousarray(want_src).tobytes()
    assert src.compute().tobytes() == np.ascontiguousarray(want_src).tobytes()


def test_only_views_from_the_blocks_first_element_are_bound(vulkan, pool):
    a = RNG.standard_normal((6, 4)).astype(np.float32)
    block = ResidentBlock.upload(pool, a)
    broadcast = block.viewed(Layout((6, 4, 3), (4, 1, 0), 0))
    assert isinstance(broadcast, ResidentView)
    assert np.asarray(broadcast).tobytes() == np.ascontiguousarray(
        np.broadcast_to(a[:, :, None], (6, 4, 3))).tobytes()
    reversed_rows = block.viewed(Layout((6, 4), (-4, 1), 20))
    assert np.asarray(reversed_rows).tobytes() == a[::-1].tobytes()
    assert block.viewed(Layout((5, 4), (4, 1), 4)) is None  # starts one row in: a host copy
    assert block.viewed(Layout((7, 4), (4, 1), 0)) is None  # past the block's end
