"""`lazyfuel.graph.kept_indices`: a select over resident blocks uploads its indices once.

Resident indices (`persist(device=True)` of an index array, lazy: each block checked when read)
work as index_select and gather indices where the source's blocks lie on the device (they crashed
in `span.spanning_view`, which took device blocks for numpy arrays); concrete indices, a read-only
snapshot, stay on the device between computes (`lf.profile`: 0 bytes up the second time), are
bounded by `kept_indices`, and go when their snapshot goes. Fresh random data, compared bit for bit
with numpy."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel.graph.kept_indices import KEPT, snapshot_of

RNG = np.random.default_rng()
ROWS, COLS, CHUNK = 4096, 16, 1024


def _resident_table() -> tuple[np.ndarray, lf.Array]:
    a = RNG.standard_normal((ROWS, COLS)).astype(np.float32)
    return a, lf.from_array(a, chunks=(CHUNK, COLS)).persist(device=True)


def _within_chunks(n_chunks: int = ROWS // CHUNK) -> np.ndarray:
    """Rows permuted inside each chunk (issue 18's W3): each output block reads one source block."""
    return np.concatenate([RNG.permutation(CHUNK) + k * CHUNK for k in range(n_chunks)])


def _computed_twice(y: lf.Array) -> tuple[np.ndarray, list[int]]:
    """`y.compute(device=True)` twice, the result of the second as numpy and each one's bytes up."""
    ups = []
    for _ in range(2):
        with lf.profile() as p:
            out = y.compute(device=True)
        ups.append(p.bytes_uploaded)
    return np.asarray(out), ups


@pytest.mark.parametrize("index_dtype", [np.int64, np.uint32])
def test_resident_indices_select_from_resident_blocks_and_upload_nothing_again(vulkan, index_dtype):
    a, x = _resident_table()
    within = _within_chunks()
    idx = lf.from_array(within.astype(index_dtype), chunks=(CHUNK,)).persist(device=True)
    got, ups = _computed_twice(x.index_select(0, idx))
    assert got.tobytes() == a[within].tobytes()
    assert ups[1] == 0, ups  # the checked, moved indices stayed on the device


def test_resident_random_indices_over_several_resident_blocks_are_exact(vulkan):
    a, x = _resident_table()
    ids = RNG.integers(0, ROWS, 3000)
    idx = lf.from_array(ids, chunks=(1000,)).persist(device=True)
    for y, want in ((x.index_select(0, idx), a[ids]), (x.index_select(0, idx).masked_fill(
            RNG.random((3000, 1)) < 0.5, -1.0), None)):
        got = np.asarray(y.compute(device=True))
        if want is not None:
            assert got.tobytes() == want.tobytes()
        else:
            assert got.shape == (3000, COLS)


def test_resident_gather_indices_work(vulkan):
    a, x = _resident_table()
    pos = RNG.integers(0, ROWS, (ROWS, COLS))
    idx = lf.from_array(pos, chunks=(CHUNK, COLS)).persist(device=True)
    got = np.asarray(x.gather(0, idx).compute(device=True))
    assert got.tobytes() == np.take_along_axis(a, pos, 0).tobytes()


def test_a_bad_resident_index_is_an_index_error_every_compute(vulkan):
    _, x = _resident_table()
    bad = _within_chunks()
    bad[5] = ROWS + 7
    idx = lf.from_array(bad, chunks=(CHUNK,)).persist(device=True)
    y = x.index_select(0, idx)
    for _ in range(2):  # nothing kept from a failed check
        with pytest.raises(IndexError, match=str(ROWS + 7)):
            y.compute(device=True)


def test_concrete_indices_are_uploaded_once_for_a_graph_computed_again(vulkan):
    a, x = _resident_table()
    within = _within_chunks()
    y = x.index_select(0, within).masked_fill(lf.from_array(np.zeros((ROWS, 1), bool)), -1.0)
    got, ups = _computed_twice(y)
    assert got.tobytes() == a[within].tobytes()
    with lf.config(kept_indices=0):
        _, off = _computed_twice(y)
    assert ups[1] < off[1] - (ROWS * 4 - 1), (ups, off)  # every index byte saved (the mask still moves)


def test_kept_indices_are_bounded_and_go_with_their_snapshot(vulkan):
    _, x = _resident_table()
    KEPT.clear()
    home = None
    with lf.config(kept_indices=2 * CHUNK * 4):  # room for two of the four index blocks
        y = x.index_select(0, _within_chunks())
        y.compute(device=True)
        homes = {k[2] for k in KEPT._entries}
        assert len(homes) == 1
        (home,) = homes
        assert KEPT.bytes_on(home) <= 2 * CHUNK * 4 and len(KEPT) == 2
    del y
    gc.collect()
    assert KEPT.bytes_on(home) == 0 and len(KEPT) == 0  # the snapshot went: so did its copies


def test_a_host_source_keeps_nothing(vulkan):
    a = RNG.standard_normal((ROWS, COLS)).astype(np.float32)
    KEPT.clear()
    within = _within_chunks()
    got = lf.from_array(a, chunks=(CHUNK, COLS)).index_select(0, within).compute()
    assert got.tobytes() == a[within].tobytes() and len(KEPT) == 0


def test_only_snapshots_are_kept():
    user = np.arange(10, dtype=np.uint32)
    user.flags.writeable = False
    assert snapshot_of(user) is None and snapshot_of(user[2:]) is None  # the caller's array may change
    x = lf.from_array(np.zeros((10, 2), np.float32)).index_select(0, user)
    snapshot = x._node.indices.values
    assert snapshot_of(snapshot[3:]) is snapshot
