"""Host arrays imported as device memory (VK_EXT_external_memory_host): the device reads and
writes numpy's own pages, kernels bind them in zero-copy mode, and whatever cannot be imported or
bound falls back to a copy; several threads at once; the pool's queues."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from test_vulkan_threads import task
from vulkan_helpers import ProgramBuilder, random_array, run_one, same_bits

from lazyfuel.backends.vulkan.batch import Batch
from lazyfuel.backends.vulkan.dispatch import Recorder
from lazyfuel.backends.vulkan.memtypes import Mode
from lazyfuel.backends.vulkan.queues import queue_count
from lazyfuel.backends.vulkan.transfer import in_mode
from lazyfuel.dtypes import DType


@pytest.fixture
def imports(pool):
    """The pool's allocator importing every host array however small (restored afterwards)."""
    if pool.allocator.imports is None:
        pytest.skip("the device cannot import host memory")
    saved = pool.allocator.import_min
    pool.allocator.import_min = 0
    yield pool.allocator
    pool.allocator.import_min = saved


@pytest.fixture
def zero_copy(pool):
    """An allocator in zero-copy mode on the pool, every array imported, import calls recorded."""
    mode = Mode.ZERO_COPY if pool.allocator.imports is not None else None
    with in_mode(pool, mode, import_min=0) as allocator:
        if allocator.mode is not Mode.ZERO_COPY:
            pytest.skip("the device cannot import host memory")
        calls: list[tuple[int, int, bool]] = []
        original = allocator.import_host

        def spy(data):
            found = original(data)
            calls.append((int(data.__array_interface__["data"][0]), data.nbytes, found is not None))
            return found

        allocator.import_host = spy
        allocator.calls = calls
        yield allocator


def test_the_device_writes_into_a_numpy_array_in_place(pool, imports):
    """A fill recorded on an imported array lands in numpy's memory, exactly where asked: the
    bytes before and after stay as they were (the import covers whole pages around them)."""
    a = np.zeros(3001, np.uint32)
    imported = imports.import_host(a[1:].view(np.uint8))
    assert imported is not None and imported.host is None and imported.block.keep is not None
    with pool.batch() as batch:
        batch.own(imported)
        batch.fill_u32(imported, 0xDEADBEEF, 1000 * 4)
        batch.run()
    assert a[0] == 0 and (a[1:1001] == 0xDEADBEEF).all() and not a[1001:].any()
    assert imported.block.imported is None, "the batch released the import when it closed"


def test_the_device_copies_out_of_a_numpy_array(pool, imports):
    src = np.arange(70_000, dtype=np.uint8)
    imported = imports.import_host(src[7:])
    out = np.empty(src.size - 7, np.uint8)
    with pool.batch() as batch:
        batch.own(imported)
        dst = batch.alloc(out.nbytes)
        batch.copy(imported, 0, dst, 0, out.nbytes)
        batch.barrier()
        batch.download(dst, out)
        batch.run()
    assert np.array_equal(out, src[7:])


def test_zero_copy_binds_inputs_and_writes_results_in_place(executor, zero_copy, monkeypatch):
    """index_select then masked_fill: the kernels read the imported inputs and the last one writes
    the result array itself: no vkCmdCopyBuffer moves data (only the status words may come back
    through one) and the result's pages were imported."""
    copies = []
    original = Recorder.copy
    monkeypatch.setattr(Recorder, "copy", lambda self, *args: (copies.append(args), original(self, *args))[1])
    rng = np.random.default_rng(8)
    x = random_array(rng, DType.F32, (300, 64))
    idx = rng.integers(0, 300, 128).astype(np.uint32)
    mask = rng.integers(0, 2, (128, 64)).astype(bool)
    fill = np.float32(-2.5).tobytes()
    b = ProgramBuilder(x, idx, mask)
    rows = b.index_select(0, x.shape, DType.F32, 0, 1, 128)
    got = run_one(executor, b, b.masked_fill(rows, (128, 64), DType.F32, 2, fill))
    same_bits(got, np.where(mask, np.float32(-2.5), x[idx]))
    assert not [args for args in copies if args[-1] > 1024], "no data copied"
    imported = {address for address, _, ok in zero_copy.calls if ok}
    assert {x.ctypes.data, idx.ctypes.data, mask.ctypes.data, got.ctypes.data} <= imported


def test_zero_copy_falls_back_where_it_cannot_bind(executor, zero_copy):
    """An input starting off the binding alignment and a result that is not whole 16-byte words
    are copied instead (kernels bind 16-byte-aligned ranges and write whole words); results exact."""
    rng = np.random.default_rng(9)
    stored = random_array(rng, DType.U8, (5, 33))
    x = stored[:, 1:]  # its span starts one byte in
    idx = np.array([4, 0, 2], np.uint32)  # 3 rows of 32 bytes: 96, whole words
    b = ProgramBuilder(x, idx)
    got = run_one(executor, b, b.index_select(b.input(0), x.shape, DType.U8, 0, 1, 3))
    same_bits(got, np.ascontiguousarray(x[idx]))
    odd = np.array([1, 3, 3], np.uint32)
    b = ProgramBuilder(stored, odd)
    got = run_one(executor, b, b.index_select(0, stored.shape, DType.U8, 1, 1, 3))  # 15 bytes
    same_bits(got, np.take(stored, odd, axis=1))
    if zero_copy.direct:  # copied by the CPU into and out of mapped memory
        assert not any(address == stored.ctypes.data + 1 for address, _, _ in zero_copy.calls)
        assert not any(nbytes == 15 for _, nbytes, _ in zero_copy.calls)
    # elsewhere (a discrete GPU: seen on the H200) both are imported for the device's copy, which
    # has no binding alignment or 16-byte granularity; the bits above show the copy was right


def test_imports_from_many_threads(executor, zero_copy):
    """Imported inputs and results live exactly as long as their batch, whatever the threads do."""
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        rng = np.random.default_rng(500 + k)
        try:
            for _ in range(40):
                task(executor, rng)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, f"{len(errors)} tasks failed; first: {errors[0]!r}"
    assert sum(ok for *_, ok in zero_copy.calls) > 100


def test_queues(pool):
    family = pool.queue_family
    assert queue_count(pool.physical, family, "1") == 1
    default = queue_count(pool.physical, family, "")
    assert 1 <= default <= 4 and queue_count(pool.physical, family, "64") >= default
    with pytest.raises(ValueError, match=r"LAZYFUEL_VULKAN_QUEUES='two': expected a number of queues"):
        queue_count(pool.physical, family, "two")
    with pool.batch() as batch:
        assert isinstance(batch, Batch) and 0 <= batch.context.queue_slot < len(pool.queues)
