"""One pool's resident blocks under a budget (`backends.vulkan.resident_store`), on the real pool:
the budget in bytes as configured, the least recently used blocks spilled to host memory to make
room, every block read back bit-exact on fresh random data, a block larger than the whole budget
refused naming the sizes, and the device's blocks counted as they come and go."""

from __future__ import annotations

import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel.backends.vulkan.residency import ResidentBlock
from lazyfuel.backends.vulkan.resident_store import store_of

BLOCK = 64 << 10


def test_blocks_past_the_budget_spill_the_least_recently_used_and_read_back_bit_exact(pool) -> None:
    store = store_of(pool)
    assert store_of(pool) is store and store.pool is pool
    before = store.blocks
    rng = np.random.default_rng(91)
    arrays = [rng.integers(0, 256, BLOCK, dtype=np.uint8) for _ in range(5)]
    with lf.config(device_memory_budget=3 * BLOCK):
        assert store.budget == 3 * BLOCK
        blocks = [ResidentBlock.upload(pool, a) for a in arrays]
        try:
            assert [b.spilled for b in blocks] == [True, True, False, False, False]  # oldest first
            assert store.device_bytes <= store.budget and store.blocks == before + 3
            for block, a in zip(blocks, arrays):
                assert np.asarray(block).tobytes() == a.tobytes()
        finally:
            for block in blocks:
                block.free()
    assert store.blocks == before


def test_a_block_larger_than_the_whole_budget_is_refused_naming_the_sizes(pool) -> None:
    says = (rf"a resident block of {2 * BLOCK} bytes is larger than the device memory budget of {BLOCK} "
            rf"bytes on .* \(lazyfuel.config.device_memory_budget={BLOCK}\); raise the budget")
    with lf.config(device_memory_budget=BLOCK), pytest.raises(MemoryError, match=says):
        ResidentBlock.upload(pool, np.zeros(2 * BLOCK, np.uint8))


def test_the_budget_looks_the_device_heap_up_once_per_mode(pool, monkeypatch) -> None:
    """A fractional budget is that fraction of the device heap, looked up once per allocator mode
    (the budget is asked for every reserve and every pin's release, four times a block of a
    replayed W3 persist: issue 18 W3), and follows the knob and the mode as they change."""
    from lazyfuel.backends.vulkan.memtypes import Mode, Use
    from lazyfuel.backends.vulkan.transfer import in_mode

    store, allocator = store_of(pool), pool.allocator
    asked: list[object] = []
    real = type(allocator).type_for
    monkeypatch.setattr(type(allocator), "type_for", lambda self, use: asked.append(use) or real(self, use))
    heap = allocator.heap_bytes(real(allocator, Use.DEVICE))
    asked.clear()
    with lf.config(device_memory_budget=0.25):
        assert all(store.budget == int(0.25 * heap) for _ in range(50))
        with lf.config(device_memory_budget=0.5):
            assert store.budget == int(0.5 * heap)
    with lf.config(device_memory_budget=1 << 20):
        assert store.budget == 1 << 20
    assert len(asked) <= 1
    with in_mode(pool, Mode.STAGED):
        staged = allocator.heap_bytes(real(allocator, Use.DEVICE))
        with lf.config(device_memory_budget=0.25):
            assert all(store.budget == int(0.25 * staged) for _ in range(50))
    assert len(asked) <= 2
