"""Exported device memory (VK_KHR_external_memory_fd): kernels write it, an fd carries it over.

The export half of the crossing to CUDA, on the real device: `VulkanExecutor.export` runs a
program into exportable memory, `fd()` hands out a descriptor and a second VkDevice (a replica
pool on the same physical device) imports it with VkImportMemoryFdInfoKHR and reads the kernels'
bits back through its own batch. Descriptors are counted to show none leaks. The executor is the
`backends.base.MemoryExporter` the graph's crossing asks for: its GPU's UUID and a result handle."""

from __future__ import annotations

import os

import numpy as np
import pytest
from vulkan_helpers import ProgramBuilder, random_array, same_bits

from lazyfuel.backends import base
from lazyfuel.backends.vulkan import get_pool
from lazyfuel.backends.vulkan.export import ExportedMemory, device_uuid, import_fd, open_fds, supported
from lazyfuel.contracts.model import Backend
from lazyfuel.dtypes import DType


@pytest.fixture(scope="module")
def exporting(pool):
    if not supported(pool):
        pytest.skip(f"{pool.label} has no VK_KHR_external_memory_fd")
    return pool


def _chain(rng: np.random.Generator, rows: int = 96):
    x = random_array(rng, DType.F32, (300, 64))
    idx = rng.integers(0, 300, rows).astype(np.uint32)
    mask = rng.integers(0, 2, (rows, 64)).astype(bool)
    b = ProgramBuilder(x, idx, mask)
    selected = b.index_select(0, x.shape, DType.F32, 0, 1, rows)
    filled = b.masked_fill(selected, (rows, 64), DType.F32, 2, np.float32(-1.5).tobytes())
    return b.program((filled,)), b.inputs, np.where(mask, np.float32(-1.5), x[idx])


def _read(memory: ExportedMemory, like: np.ndarray) -> np.ndarray:
    out = np.full(like.shape, np.float32(7.0))
    memory.download(out)
    return out


def test_kernels_write_exported_memory_that_another_device_reads_through_an_fd(executor, exporting):
    program, inputs, want = _chain(np.random.default_rng(11))
    exported = executor.export(program, inputs)
    assert isinstance(exported, ExportedMemory)
    other = get_pool(exporting.info.index, replica=1)  # its own VkDevice
    try:
        same_bits(_read(exported, want), want)
        counts = []
        for _ in range(3):  # the same memory exported and imported again: no descriptor may pile up
            before = open_fds()
            fd = exported.fd()
            assert open_fds() == before + 1
            imported = import_fd(other, fd, exported.size)  # takes the fd over
            assert imported.pool is other
            assert imported.allocation.block.memory != exported.allocation.block.memory
            same_bits(_read(imported, want), want)
            imported.free()
            counts.append(open_fds() - before)
        # lavapipe closes the descriptor with the imported memory; NVIDIA's driver keeps one file
        # of its own open after the first import (seen on the H200), so: nothing grows after that
        assert counts[1:] == [0, 0] and counts[0] in (0, 1), counts
    finally:
        exported.free()


def test_exported_pages_outlive_the_exporters_handle(executor, exporting):
    """The importer's mapping keeps the pages: freeing the exporter's memory first loses nothing."""
    program, inputs, want = _chain(np.random.default_rng(12), rows=40)
    exported = executor.export(program, inputs)
    imported = import_fd(get_pool(exporting.info.index, replica=1), exported.fd(), exported.size)
    exported.free()
    exported.free()  # idempotent
    try:
        same_bits(_read(imported, want), want)
    finally:
        imported.free()


def test_an_unimported_fd_is_the_callers_to_close(executor, exporting):
    program, inputs, _ = _chain(np.random.default_rng(13), rows=8)
    exported = executor.export(program, inputs)
    before = open_fds()
    for _ in range(5):
        os.close(exported.fd())
    assert open_fds() == before
    exported.free()


def test_export_allocates_nothing_from_the_pool_and_a_program_input_comes_back_as_it_is(executor, exporting):
    program, inputs, _ = _chain(np.random.default_rng(14), rows=16)
    in_use = exporting.allocator.in_use
    exported = executor.export(program, inputs)
    assert exporting.allocator.in_use == in_use  # the batch's allocations were given back
    exported.free()
    b = ProgramBuilder(inputs[0])
    passthrough = b.program((0,))
    got = executor.export(passthrough, [inputs[0]])
    assert isinstance(got, np.ndarray) and got is not inputs[0]
    same_bits(got, inputs[0])


def test_device_uuid_is_sixteen_stable_bytes(exporting):
    uuid = device_uuid(exporting.physical)
    assert len(uuid) == 16 and uuid == device_uuid(exporting.physical)


def test_the_executor_is_the_memory_exporter_naming_its_gpu(executor, exporting):
    found = base.exporter(Backend.Vulkan)
    assert isinstance(found, base.MemoryExporter) and isinstance(executor, base.MemoryExporter)
    assert found.export_gpu() == executor.export_gpu() == device_uuid(exporting.physical)
    assert base.importer(Backend.Vulkan) == "Vulkan cannot map exported device memory"


def test_an_exported_result_hands_out_fds_downloads_and_frees_once(executor, exporting):
    program, inputs, want = _chain(np.random.default_rng(15), rows=24)
    result = executor.export(program, inputs)
    assert result.size >= want.nbytes
    before = open_fds()
    os.close(result.fd())
    assert open_fds() == before
    same_bits(_read(result, want), want)
    empty = np.empty((0, 64), np.float32)
    result.download(empty)  # nothing to copy
    result.free()
    assert result.freed
    result.free()
