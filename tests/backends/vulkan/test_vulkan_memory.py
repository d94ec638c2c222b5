"""The device allocator (`backends.vulkan.memory`) on the real device: size classes, aligned allocations
reused and counted, a buffer too large for the device refused saying what was asked, and staging made
of the allocator's own host pages imported (blocks of their own made by threads at once)."""

from __future__ import annotations

import pytest

from lazyfuel.backends.vulkan.check import VulkanMemoryError
from lazyfuel.backends.vulkan.memory import size_class
from lazyfuel.backends.vulkan.memtypes import Use


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


def _staged(pool):
    from lazyfuel.backends.vulkan.memtypes import Mode
    from lazyfuel.backends.vulkan.transfer import in_mode

    if pool.allocator.imports is None:
        pytest.skip("the device cannot import host memory")
    return in_mode(pool, Mode.STAGED)


@pytest.mark.parametrize("nbytes", [4096, 40 << 20], ids=["in a shared block", "a block of its own"])
@pytest.mark.parametrize("download", [False, True], ids=["upload", "download"])
def test_staging_is_made_of_the_allocators_own_pages_imported(pool, nbytes, download):
    import numpy as np

    with _staged(pool) as allocator:
        stage = allocator.alloc(nbytes, staging=True, download=download)
        block = stage.block
        assert block.pages is not None and block.host is not None and block.keep is not None
        assert allocator.resources()["page_blocks"] == 1 and allocator.resources()["imports"] == 0
        bits = np.random.default_rng(nbytes).integers(0, 256, stage.size, np.uint8)
        stage.host[:] = bits
        assert stage.host.tobytes() == bits.tobytes()  # (programs through it: test_vulkan_staging.py)
        allocator.free(stage)
        assert allocator.alloc(nbytes, staging=True, download=download).address == stage.address  # reused
        imports = allocator.imports
    assert allocator.resources()["page_blocks"] == 0 and imports.live == 0  # destroyed: every import released


def test_staging_pages_off_makes_the_drivers_staging(pool):
    with _staged(pool) as allocator:
        allocator.staging_pages = False
        stage = allocator.alloc(40 << 20, staging=True)
        assert stage.block.pages is None and stage.block.memory_type >= 0 and stage.host is not None
        assert allocator.resources()["page_blocks"] == 0
        allocator.free(stage)


def test_threads_making_blocks_of_their_own_at_once_get_each_their_own(pool):
    import threading

    with _staged(pool) as allocator:
        got, barrier = [], threading.Barrier(4)

        def make(use: str) -> None:
            barrier.wait()
            for _ in range(3):
                got.append(allocator.alloc(20 << 20, staging=use == "upload", download=use == "download")
                           if use != "device" else allocator.alloc(20 << 20))

        uses = ("upload", "upload", "download", "device")
        threads = [threading.Thread(target=make, args=(use,)) for use in uses]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(got) == 12 and len({a.block.buffer for a in got}) == 12  # a block each, none shared
        assert allocator.in_use == sum(a.size for a in got)
        assert allocator.resources()["blocks"] == 12 and allocator.resources()["page_blocks"] == 9
        for a in got:
            allocator.free(a)
        assert allocator.in_use == 0


def test_threads_making_shared_blocks_at_once_hand_out_apart_and_use_every_blocks_room(pool):
    """Shared blocks are made outside the lock: threads that find no room at once wait for the
    block one of them makes where it has room for them too (twelve allocations of a quarter block
    make three blocks, not one a thread), every allocation lies apart, each written and read back
    as its own, and the room left is handed out before another block is made."""
    import threading
    from itertools import pairwise

    import numpy as np

    with _staged(pool) as allocator:
        size = allocator.block_size // 4  # the largest shared size: four to a block
        got, barrier = [], threading.Barrier(4)

        def make(k: int) -> None:
            barrier.wait()
            for _ in range(3):
                a = allocator.alloc(size, staging=True)
                a.host[:] = k
                got.append((k, a))

        threads = [threading.Thread(target=make, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        spans = sorted((a.block.address + a.offset, a.size) for _, a in got)
        assert all(x + n <= y for (x, n), (y, _) in pairwise(spans))  # none overlaps another
        assert all(np.all(a.host == k) for k, a in got)
        blocks = {id(a.block): a.block for _, a in got}
        made = len(blocks)
        assert made == 3  # 12 allocations, 4 a block: the threads waited for one another's
        kept_open = [b for b in blocks.values() if b in allocator._open[Use.UPLOAD]]  # the newest OPEN_BLOCKS
        room = sum(b.size - b.used for b in kept_open)
        more = [allocator.alloc(size, staging=True) for _ in range(room // size)]
        assert {id(a.block) for a in more} <= set(blocks)  # the room left is used: no block made
        assert allocator.in_use == sum(a.size for _, a in got) + sum(a.size for a in more)
        for a in [a for _, a in got] + more:
            allocator.free(a)


def test_a_shared_block_that_cannot_be_made_fails_its_maker_alone(pool):
    """The thread making a shared block gets the device's refusal (a real
    VK_ERROR_OUT_OF_DEVICE_MEMORY injected where the block is made); the threads that waited for
    it make their own, and every allocation handed out lies apart, nothing in use left over."""
    import threading
    from itertools import pairwise

    from lazyfuel.backends.vulkan import faults

    with _staged(pool) as allocator:
        size = allocator.block_size // 4
        got, errors, barrier = [], [], threading.Barrier(4)

        def make() -> None:
            barrier.wait()
            try:
                got.append(allocator.alloc(size, staging=True))
            except MemoryError as e:
                errors.append(e)

        with faults.out_of_device_memory(count=1) as oom:
            threads = [threading.Thread(target=make) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert oom.fired == 1 and len(errors) == 1 and len(got) == 3, (errors, got)
        spans = sorted((a.block.address + a.offset, a.size) for a in got)
        assert all(x + n <= y for (x, n), (y, _) in pairwise(spans))
        assert not allocator._making[Use.UPLOAD]
        for a in got:
            allocator.free(a)
        assert allocator.in_use == 0


def test_staging_without_host_memory_for_its_pages_is_the_drivers(pool, monkeypatch):
    import numpy as np

    from lazyfuel.backends.vulkan import memory

    real = np.empty

    def no_room(shape, dtype=float, *args, **kwargs):
        if np.dtype(dtype) == np.uint8 and np.prod(shape) >= 40 << 20:  # the staging's pages only
            raise MemoryError("no room for the pages")
        return real(shape, dtype, *args, **kwargs)

    with _staged(pool) as allocator:
        monkeypatch.setattr(memory.np, "empty", no_room)
        stage = allocator.alloc(40 << 20, staging=True)
        monkeypatch.undo()
        assert stage.block.pages is None and stage.block.memory_type >= 0  # the driver's staging
        allocator.free(stage)


def test_making_staging_pages_gives_the_tasks_turn_up_and_reusing_them_keeps_it(pool):
    import lazyfuel as lf
    from lazyfuel import prep_gate

    with _staged(pool) as allocator:
        with lf.config(prep_slots=1), prep_gate.turn():
            stage = allocator.alloc(40 << 20, staging=True)
            assert not prep_gate.holding()  # the pages faulted and imported without the turn
        allocator.free(stage)
        with lf.config(prep_slots=1), prep_gate.turn():
            again = allocator.alloc(40 << 20, staging=True)
            assert prep_gate.holding() and again.address == stage.address  # cached: no pages made
        allocator.free(again)
