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


def test_streamed_pinned_inputs_are_read_in_place_in_every_mode(vulkan, monkeypatch):
    """A program that reads a page-locked input once in long rows (index_select + masked_fill)
    binds it and writes the page-locked result in place: no device copy in any mode. A gather's
    scattered reads are no stream: its page-locked source is copied in where the mode copies."""
    from lazyfuel.backends.vulkan.batch import Batch

    copies: list[int] = []
    original = Batch.copy
    monkeypatch.setattr(Batch, "copy", lambda self, *a: copies.append(a[-1]) or original(self, *a))
    rng = np.random.default_rng(3)
    x = lf.empty_pinned((256, 128), np.float32)  # rows of 512 bytes: streamed
    x[:] = rng.standard_normal(x.shape, dtype=np.float32)
    out = lf.empty_pinned((256, 128), np.float32)
    idx = rng.permutation(256)
    mask = rng.random((256, 1)) < 0.5
    gidx = rng.integers(0, 256, (256, 128))
    for mode in _modes(vulkan):
        with in_mode(vulkan, mode):
            copies.clear()
            y = lf.masked_fill(lf.index_select(lf.from_array(x, chunks=(256, 128)), 0, idx), mask, -1.0)
            y.compute(out=out, scheduler="sync")
            assert out.tobytes() == np.where(mask, np.float32(-1), x[idx]).tobytes(), mode
            assert x.nbytes not in copies, f"{mode}: the streamed input was copied in"
            assert out.nbytes not in copies, f"{mode}: the result was copied out"
            copies.clear()
            lf.gather(lf.from_array(x, chunks=(256, 128)), 0, gidx).compute(out=out, scheduler="sync")
            assert out.tobytes() == np.take_along_axis(np.asarray(x), gidx, axis=0).tobytes(), mode
            binds = vulkan.allocator.direct or vulkan.allocator.mode is Mode.ZERO_COPY
            assert (x.nbytes in copies) == (not binds), mode


def test_which_inputs_are_streams():
    """A property of the plan (`Program.streamed_inputs`), not of the executor: masked_fill's
    inputs, index_select's and select_fill's indices (and select_fill's mask) always;
    index_select's source only with rows of at least STREAMED_ROW_BYTES and no more rows picked
    than it has; never gather's or a view's."""
    from vulkan_helpers import ProgramBuilder

    from lazyfuel.dtypes import DType
    from lazyfuel.planner.streams import STREAMED_ROW_BYTES

    def streamed(builder: ProgramBuilder, out: int) -> list[bool]:
        return list(builder.program((out,)).streamed_inputs)

    cols = STREAMED_ROW_BYTES // 4
    x, few, many = np.zeros((8, cols), np.float32), np.arange(8, dtype=np.uint32), np.zeros(9, np.uint32)
    b = ProgramBuilder(x, few, np.zeros((8, cols), np.bool_))
    picked = b.index_select(0, x.shape, DType.F32, 0, 1, 8)
    assert streamed(b, b.masked_fill(picked, (8, cols), DType.F32, 2, bytes(4))) == [True, True, True]
    b = ProgramBuilder(x, many)
    assert streamed(b, b.index_select(0, x.shape, DType.F32, 0, 1, 9)) == [False, True]  # rows read again
    short = np.zeros((8, cols - 1), np.float32)
    b = ProgramBuilder(short, few)
    assert streamed(b, b.index_select(0, short.shape, DType.F32, 0, 1, 8)) == [False, True]
    b = ProgramBuilder(x, np.zeros((8, cols), np.uint32))
    assert streamed(b, b.gather(0, x.shape, DType.F32, 0, 1, (8, cols))) == [False, False]
    b = ProgramBuilder(x.T)
    assert streamed(b, b.contiguize(0)) == [False]
    b = ProgramBuilder(x, few, np.zeros((8, cols), np.bool_))  # the fused pair reads as the two did
    assert streamed(b, b.select_fill(0, x.shape, DType.F32, 0, 1, 8, 2, bytes(4))) == [True, True, True]
    b = ProgramBuilder(x, many, np.zeros((9, cols), np.bool_))
    assert streamed(b, b.select_fill(0, x.shape, DType.F32, 0, 1, 9, 2, bytes(4))) == [False, True, True]


def test_a_result_later_steps_read_again_stays_in_device_memory(vulkan, monkeypatch):
    """In a copying mode a page-locked result that a later step reads is computed in device memory
    (and copied out), so the later step does not read it back over the link; the last result is
    written in place."""
    from vulkan_helpers import ProgramBuilder

    from lazyfuel.backends.vulkan.batch import Batch
    from lazyfuel.backends.vulkan.executor import VulkanExecutor
    from lazyfuel.dtypes import DType

    copies: list[int] = []
    original = Batch.copy
    monkeypatch.setattr(Batch, "copy", lambda self, *a: copies.append(a[-1]) or original(self, *a))
    rng = np.random.default_rng(5)
    x = rng.standard_normal((64, 128), dtype=np.float32)
    idx = rng.permutation(64).astype(np.uint32)
    mask = rng.random((64, 128)) < 0.5
    b = ProgramBuilder(x, idx, mask)
    picked = b.index_select(0, x.shape, DType.F32, 0, 1, 64)
    filled = b.masked_fill(picked, (64, 128), DType.F32, 2, np.float32(-1).tobytes())
    outs = [lf.empty_pinned((64, 128), np.float32) for _ in range(2)]
    with in_mode(vulkan, Mode.STAGED) as allocator:
        copies.clear()
        got = VulkanExecutor(vulkan).run(b.program((picked, filled)), b.inputs, out=outs)
        assert got[0] is outs[0] and got[1] is outs[1]
        assert outs[0].tobytes() == x[idx].tobytes()
        assert outs[1].tobytes() == np.where(mask, np.float32(-1), x[idx]).tobytes()
        if not allocator.direct:
            assert copies == [x.nbytes], copies  # `picked` copied out; `filled` written in place
