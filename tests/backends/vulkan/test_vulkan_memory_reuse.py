"""Device memory reused between computes over resident blocks (issue 18's W3), on the real pool.

A compute over `persist(device=True)` blocks, done again, makes no new device memory
(`VulkanAllocator._new_unlocked`: vkAllocateMemory, shared blocks and blocks of their own) and no
new recording context: freed result blocks and staging come back from the allocator's dedicated
cache (`cache_policy.py`) and contexts from the pool. A reused buffer is never one a live result
still holds: results kept across computes, a DLPack view outliving its DeviceArray, and freed
memory poisoned before it is handed out again all read back bit-equal to numpy on fresh random
data.
"""

from __future__ import annotations

import gc
from collections import Counter

import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel import dlpack
from lazyfuel.backends.vulkan import batch, memory
from lazyfuel.graph.resident import held_blocks

RNG = np.random.default_rng()
ROWS, COLS, CHUNK = 2048, 64, 256


@pytest.fixture
def made(monkeypatch):
    """Counts of new device memory blocks and recording contexts made while the test runs."""
    counts: Counter[str] = Counter()
    new_block, context_init = memory.VulkanAllocator._new_unlocked, batch.Context.__init__

    def counted_block(self, *args, **kwargs):
        counts["blocks"] += 1
        return new_block(self, *args, **kwargs)

    def counted_context(self, *args, **kwargs):
        counts["contexts"] += 1
        context_init(self, *args, **kwargs)

    monkeypatch.setattr(memory.VulkanAllocator, "_new_unlocked", counted_block)
    monkeypatch.setattr(batch.Context, "__init__", counted_context)
    return counts


def _w3(a: np.ndarray) -> tuple[lf.Array, np.ndarray]:
    """W3 over resident blocks of `a`: rows permuted inside each chunk, then a row mask filled."""
    x = lf.from_array(a, chunks=(CHUNK, COLS)).persist(device=True)
    idx = np.concatenate([lo + RNG.permutation(CHUNK) for lo in range(0, ROWS, CHUNK)])
    mask = RNG.random((ROWS, 1)) < 0.5
    return x.index_select(0, idx).masked_fill(mask, -1.0), np.where(mask, np.float32(-1), a[idx])


def _fresh() -> np.ndarray:
    return RNG.standard_normal((ROWS, COLS)).astype(np.float32)


def test_a_compute_done_again_makes_no_device_memory_or_context(vulkan, made):
    y, want = _w3(_fresh())
    for _ in range(2):  # the first compute may make what the cache then keeps
        out = y.persist(device=True)
        del out
        gc.collect()
    made.clear()
    for _ in range(3):
        out = y.persist(device=True)
        got = np.concatenate([np.asarray(b) for b in held_blocks(out.to_dask())])
        assert got.tobytes() == want.tobytes()
        del out, got
        gc.collect()
    assert made["blocks"] == 0 and made["contexts"] == 0, made


def test_results_kept_across_computes_are_never_reused_under_them(vulkan, pool):
    assert pool.allocator.poison is not None  # the fixture's: memory handed out again is poisoned
    a, b = _fresh(), _fresh()
    ya, want_a = _w3(a)
    yb, want_b = _w3(b)
    kept = ya.persist(device=True)
    dropped = yb.persist(device=True)
    del dropped
    gc.collect()  # its blocks go back to the cache: the next compute takes them
    again = yb.persist(device=True)
    gc.collect()
    for held, want in ((kept, want_a), (again, want_b)):
        got = np.concatenate([np.asarray(blk) for blk in held_blocks(held.to_dask())])
        assert got.tobytes() == want.tobytes()


def test_a_dlpack_view_keeps_its_memory_through_later_computes(vulkan, pool):
    y, want = _w3(_fresh())
    r = y.compute(device=True)
    if r.__dlpack_device__()[0] != dlpack.CPU:
        pytest.skip(f"{pool.label}'s results are not a CPU DLPack here")
    view = np.from_dlpack(r)
    del r
    gc.collect()
    for _ in range(3):  # each frees and takes result memory: never the view's
        other, other_want = _w3(_fresh())
        assert np.asarray(other.compute(device=True)).tobytes() == other_want.tobytes()
        gc.collect()
    assert view.tobytes() == want.tobytes()
