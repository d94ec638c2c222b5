"""Page-locked host arrays (`lf.empty_pinned`): what they are, that runs read and write them with no
CPU copy in every transfer mode (bit-exact, results poisoned first), views and misaligned offsets,
their lifetime, and a pool closed while they live."""

from __future__ import annotations

import gc
import re

import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel.backends.vulkan.memtypes import Mode, Use
from lazyfuel.backends.vulkan.pool import DevicePool
from lazyfuel.backends.vulkan.transfer import in_mode

POISON = np.uint8(0xA5)


@pytest.fixture
def vulkan(monkeypatch, pool):
    monkeypatch.setenv("LAZYFUEL_BACKEND", "vulkan")
    return pool


def _modes(pool):
    modes = [Mode.STAGED]
    if pool.allocator.direct:
        modes.append(Mode.DIRECT)
    if pool.allocator.imports is not None:
        modes += [Mode.IMPORT, Mode.ZERO_COPY]
    return modes


@pytest.mark.parametrize("dtype", ["float32", "uint8", "float64", "bool", "uint32"])
def test_empty_pinned_is_a_numpy_array_of_the_shape_and_dtype(pool, dtype):
    a = lf.empty_pinned((3, 5, 7), dtype)
    assert isinstance(a, np.ndarray) and a.shape == (3, 5, 7) and a.dtype == np.dtype(dtype)
    assert a.flags.c_contiguous and a.flags.writeable
    a[...] = np.arange(a.size).reshape(a.shape).astype(dtype)
    assert np.array_equal(a, np.arange(a.size).reshape(a.shape).astype(dtype))
    assert pool.pinned.find(a.reshape(-1).view(np.uint8)) is not None
    assert pool.pinned.find(np.zeros(64, np.uint8)) is None, "a malloc'd array is not pinned"


def test_empty_pinned_is_freed_with_its_last_view(pool):
    gc.collect()
    before = pool.pinned.live
    a = lf.empty_pinned(1000, np.float32)
    view = a[10:20]
    del a
    gc.collect()
    assert pool.pinned.live == before + 1, "a view keeps the memory"
    view[:] = 1.5
    del view
    gc.collect()
    assert pool.pinned.live == before


def test_empty_pinned_refuses_what_it_cannot_make(pool):
    with pytest.raises(TypeError, match="unsupported numpy dtype"):
        lf.empty_pinned(4, "complex256")
    with pytest.raises(ValueError, match="non-negative ints"):
        lf.empty_pinned((2, -1))
    assert lf.empty_pinned((0, 4)).shape == (0, 4)


@pytest.mark.parametrize("offset", [0, 1])
def test_a_pipeline_reads_and_writes_pinned_arrays_in_every_mode(vulkan, offset):
    """index_select + masked_fill from a pinned input into a pinned result, bit-equal to numpy;
    offset 1 puts both at an address no storage-buffer binding accepts (the copy path)."""
    rng = np.random.default_rng(offset)
    rows, cols, chunk = 2048 + offset, 64, 512
    base = lf.empty_pinned((rows, cols), np.float32)
    base[:] = rng.standard_normal(base.shape, dtype=np.float32)
    x = base[offset:]
    starts = range(0, x.shape[0], chunk)
    idx = np.concatenate([c + rng.permutation(min(chunk, x.shape[0] - c)) for c in starts])
    mask = rng.random((x.shape[0], 1)) < 0.5
    expected = np.where(mask, np.float32(-1), x[idx])
    out_base = lf.empty_pinned((rows, cols), np.float32)
    out = out_base[offset:]
    for mode in _modes(vulkan):
        with in_mode(vulkan, mode) as allocator:
            allocator.import_min = 0
            out_base.view(np.uint8)[...] = POISON
            y = lf.masked_fill(lf.index_select(lf.from_array(x, chunks=(chunk, cols)), 0, idx), mask, -1.0)
            with lf.profile() as p:
                got = y.compute(out=out, scheduler="threads", num_workers=2)
            assert got is out
            assert out.tobytes() == expected.tobytes(), mode
            assert p.bytes_downloaded == expected.nbytes, mode  # the result went straight into `out`
            if offset:
                before = out_base.reshape(-1).view(np.uint8)[:cols * 4]
                assert (before == POISON).all(), f"{mode}: wrote before `out`"


def test_pinned_inputs_bind_without_import_or_copy(vulkan):
    """In zero-copy mode (or where device memory is mapped) a pinned input is bound to the kernel
    as it is: the import path is never asked."""
    with in_mode(vulkan, Mode.ZERO_COPY if vulkan.allocator.imports is not None else None) as allocator:
        asked = []
        original = allocator.import_host
        allocator.import_host = lambda data: asked.append(data.nbytes) or original(data)
        x = lf.empty_pinned((1024, 64), np.float32)
        x[:] = np.arange(x.size, dtype=np.float32).reshape(x.shape)
        out = lf.empty_pinned((1024, 64), np.float32)
        idx = np.arange(1024)[::-1].copy()
        lf.index_select(lf.from_array(x, chunks=(1024, 64)), 0, idx).compute(out=out, scheduler="sync")
        assert np.array_equal(out, x[::-1])
        assert asked == [], "pinned arrays need no import"


def test_a_pool_closed_while_pinned_arrays_live_keeps_their_memory():
    """Closing a pool (at exit, or after a device loss) must not pull the pages from under numpy:
    the device is destroyed when the last pinned array goes."""
    pool = DevicePool()
    a = pool.pinned.empty(1 << 20)
    a[:] = 7
    pool.close()
    assert pool.closed and pool.pinned.live == 1
    assert int(a.sum()) == 7 << 20, "still readable"
    with pytest.raises(RuntimeError, match="closed"):
        pool.pinned.empty(16)
    del a
    gc.collect()
    assert pool.pinned.live == 0


def test_more_than_the_heap_is_a_memory_error_that_says_so(pool):
    """Asking a block larger than its heap is refused before the driver is asked (the spec forbids
    the call): a MemoryError with the bytes asked and the heap's size, and no validation message."""
    use_type = pool.allocator.type_for(Use.DEVICE if pool.allocator.direct else Use.DOWNLOAD)
    heap = pool.allocator.heap_bytes(use_type)
    with pytest.raises(MemoryError, match=rf"asked for (\d+) bytes .* over the {heap} bytes") as raised:
        lf.empty_pinned(heap + 4096, np.uint8)
    asked = int(re.search(r"asked for (\d+) bytes", str(raised.value)).group(1))
    assert heap + 4096 <= asked < heap + 3 * 4096, "the block asked for: the array's whole pages"
