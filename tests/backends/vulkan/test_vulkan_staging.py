"""The staging path (device memory the host cannot map), exercised on the real device.

lavapipe's memory is host-visible, so the pool normally copies straight into it. Here the pool
gets an allocator that pretends otherwise (a discrete GPU's transfer modes): device blocks stay
unmapped and every upload, download and status fill goes through staging buffers (`staged`) or
the host arrays' own imported pages (`import`, every array imported however small) and transfer
commands in the same command buffer. Staging is the allocator's own pages imported, and, apart, the
driver's own staging memory.
"""

from __future__ import annotations

import numpy as np
import pytest
from vulkan_helpers import ProgramBuilder, random_array, raw, run_one, same_bits

from lazyfuel.backends.vulkan.memtypes import Mode, Use
from lazyfuel.backends.vulkan.transfer import in_mode
from lazyfuel.dtypes import DType


@pytest.fixture(params=[(Mode.STAGED, True), (Mode.STAGED, False), (Mode.IMPORT, True)],
                ids=["staged", "staged, the driver's staging", "import"])
def staged(pool, request):
    mode, pages = request.param
    if mode.imports and pool.allocator.imports is None:
        pytest.skip("the device cannot import host memory")
    with in_mode(pool, mode, import_min=0) as allocator:
        assert not allocator.direct
        allocator.staging_pages = pages  # staging of own pages imported (decision 114), or the driver's
        yield pool
        staging = [block for block in allocator._blocks if block.staging]
        if mode is Mode.STAGED:
            assert staging and all((block.pages is not None) == pages for block in staging)


@pytest.mark.parametrize("dtype", [DType.U8, DType.BF16, DType.F32, DType.C128], ids=str)
def test_programs_through_staging_buffers(executor, staged, dtype):
    rng = np.random.default_rng(21)
    x = random_array(rng, dtype, (9, 7))[::-1, 1:]
    idx = np.array([5, 0, 8, 8], np.uint32)
    gidx = rng.integers(0, 6, (9, 6)).astype(np.uint32)
    mask = rng.integers(0, 2, (9, 6)).astype(bool)
    fill = random_array(rng, dtype, ()).tobytes()
    b = ProgramBuilder(x, idx, gidx, mask)
    src = b.input(0)
    sel = b.index_select(src, (9, 6), dtype, 0, 1, 4)
    gat = b.gather(src, (9, 6), dtype, 1, 2, (9, 6))
    filled = b.masked_fill(gat, (9, 6), dtype, 3, fill)
    got_sel, got_fill = executor.run(b.program((sel, filled)), b.inputs)
    assert all(block.host is None for block in staged.allocator._blocks if not block.staging)
    same_bits(got_sel, np.take(raw(x), idx, axis=0).view(x.dtype))
    gathered = np.take_along_axis(raw(x), gidx.astype(np.intp), axis=1)
    value = np.frombuffer(fill, f"V{dtype.itemsize}")[0]
    same_bits(got_fill, np.where(mask, value, gathered).view(x.dtype))


def test_bad_index_read_back_through_staging(executor, staged):
    x = np.arange(8, dtype=np.uint32).reshape(2, 4)
    table = np.array([[1, 0, 1, 1], [0, 6, 0, 1]], np.uint32)
    b = ProgramBuilder(x, table, np.array([1], np.uint32))
    rows = b.index_select(1, table.shape, DType.U32, 0, 2, 1)
    out = b.gather(0, x.shape, DType.U32, 0, rows, (1, 4))
    with pytest.raises(IndexError, match=r"index 6 at position \(0, 1\)"):
        run_one(executor, b, out)


@pytest.mark.parametrize("fused", [True, False], ids=["select_fill", "two kernels"])
def test_streamed_inputs_and_results_stay_in_staging(executor, pool, fused):
    """Staged mode: an input read once in long rows is read by the kernel from its upload staging,
    and a result no later step reads is written into its download staging (issue 18: no device
    buffer or device copy for either, half the chunk-sized buffers a task holds). 24 MiB of x, so
    each of them would be a dedicated device block."""
    rng = np.random.default_rng(23)
    rows, cols = 6144, 1024  # rows of 4 KiB: streamed
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    idx = rng.permutation(rows).astype(np.uint32)
    mask = rng.random((rows, cols)) < 0.5
    select_only = ProgramBuilder(x, idx)
    select_only.index_select(0, (rows, cols), DType.F32, 0, 1, rows)
    chain = ProgramBuilder(x, idx, mask)
    if fused:
        chain.select_fill(0, (rows, cols), DType.F32, 0, 1, rows, 2, np.float32(-1).tobytes())
    else:
        selected = chain.index_select(0, (rows, cols), DType.F32, 0, 1, rows)
        chain.masked_fill(selected, (rows, cols), DType.F32, 2, np.float32(-1).tobytes())
    out = np.full((rows, cols), np.nan, np.float32)
    with in_mode(pool, Mode.STAGED) as allocator:
        filled = np.where(mask, np.float32(-1), x[idx])
        for b, want, kept in ((select_only, x[idx], 0), (chain, filled, 1 - fused)):
            (got,) = executor.run(b.program((b.value_count() - 1,)), b.inputs, out=[out])
            same_bits(got, want)
            device = [blk.size for blk in allocator._blocks if blk.use is Use.DEVICE and blk.dedicated]
            assert len(device) == kept, device  # the two-kernel chain keeps its intermediate on the device
            allocator.trim()
