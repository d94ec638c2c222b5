"""The device allocator (`backends.vulkan.memory`) on the real device: size classes, aligned allocations
reused and counted, and a buffer too large for the device refused saying what was asked."""

from __future__ import annotations

import pytest

from lazyfuel.backends.vulkan.check import VulkanMemoryError
from lazyfuel.backends.vulkan.memory import size_class


def test_size_classes_are_aligned_and_close():
    for n in [1, 15, 16, 255, 256, 257, 1000, 4097, 10**6, 3 * 2**27 + 5]:
        c = size_class(n)
        assert c >= n and c % 16 == 0 and c <= max(256, n * 1.25 + 16)


def test_allocations_are_aligned_reused_and_counted(pool):
    allocator = pool.allocator
    a = allocator.alloc(1000)
    b = allocator.alloc(1000)
    assert a.address % 16 == 0 and b.address % 16 == 0 and a.address != b.address
    assert a.size == size_class(1000)
    in_use = allocator.in_use
    allocator.free(b)
    assert allocator.in_use == in_use - b.size
    again = allocator.alloc(990)  # same size class: the freed allocation comes back
    assert again.address == b.address
    big = allocator.alloc(40 << 20)  # over a quarter block: a block of its own, reused after free
    allocator.free(big)
    assert allocator.alloc(40 << 20).address == big.address
    for x in (a, again, big):
        allocator.free(x)
    assert allocator.trim() >= big.size


def test_too_large_a_buffer_says_what_was_asked(pool):
    with pytest.raises(VulkanMemoryError,
                       match=r"asked for \d+ bytes \(\d+ as allocated\) in one buffer, over the device's "
                             r"maxMemoryAllocationSize of \d+ bytes; device-local heap \d+ bytes, this pool "
                             r"holds \d+ in blocks \(\d+ in use\), so at most \d+ free"):
        pool.allocator.alloc(pool.info.max_memory_allocation_size + 1)
