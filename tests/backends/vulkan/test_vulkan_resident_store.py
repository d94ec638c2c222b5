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
