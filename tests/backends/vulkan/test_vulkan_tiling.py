"""Device limits: grids past maxComputeWorkGroupCount and buffers past maxStorageBufferRange."""

from __future__ import annotations

import numpy as np
import pytest
from vulkan_helpers import ProgramBuilder, random_array, raw, run_one, same_bits

import lazyfuel as lf
from lazyfuel.dtypes import DType

MIB = 1 << 20


@pytest.fixture
def few_groups(pool, monkeypatch):
    """Pretend the device allows only 3 workgroups per dispatch, and keep workgroups small (32 x 4
    items), so every grid of these small arrays is split."""
    monkeypatch.setattr(pool, "max_groups", 3)
    for family in pool.groups:
        monkeypatch.setitem(pool.groups, family, (32, 4))
    return pool


@pytest.fixture(params=["32-bit", "64-bit"])
def positions(request):
    """Run with the shaders' 32-bit position arithmetic and again with the 64-bit one, which real
    data reaches only past 2**31 elements."""
    with lf.config(_force_wide=request.param == "64-bit"):
        yield request.param


@pytest.mark.parametrize("dtype", [DType.U8, DType.F16, DType.F32, DType.F64, DType.C128], ids=str)
def test_split_grids_are_exact(executor, few_groups, memory_mode, positions, mapping, dtype):
    rng = np.random.default_rng(3)
    x = random_array(rng, dtype, (37, 161))
    view = x[::-1, ::2]
    idx = rng.integers(0, 37, 41).astype(np.uint32)
    gidx = rng.integers(0, 81, (37, 31)).astype(np.uint32)
    mask = rng.integers(0, 2, (37, 161)).astype(bool)
    fill = random_array(rng, dtype, ()).tobytes()
    before = few_groups.dispatches
    b = ProgramBuilder(view, idx, gidx, x, mask)
    src = b.input(0)
    sel = b.index_select(src, view.shape, dtype, 0, 1, 41)
    gat = b.gather(src, view.shape, dtype, 1, 2, (37, 31))
    filled = b.masked_fill(3, x.shape, dtype, 4, fill)
    got_view, got_sel, got_gat, got_fill = executor.run(b.program((src, sel, gat, filled)), b.inputs)
    assert few_groups.dispatches - before >= 3 * 4, "grids were not split"
    same_bits(got_view, np.ascontiguousarray(view))
    same_bits(got_sel, np.take(raw(view), idx, axis=0).view(x.dtype))
    same_bits(got_gat, np.take_along_axis(raw(view), gidx.astype(np.intp), axis=1).view(x.dtype))
    value = np.frombuffer(fill, f"V{dtype.itemsize}")[0]
    same_bits(got_fill, np.where(mask, value, raw(x)).view(x.dtype))


@pytest.mark.slow
def test_buffers_past_128_mib(executor, pool):
    """A 136 MiB source (past lavapipe's maxStorageBufferRange of 128 MiB, so the device-address
    shaders run there): rows and elements past the first 128 MiB are selected, and a 130 MiB
    reversed view is resolved (a grid of ~520k workgroups, split by maxComputeWorkGroupCount)."""
    limit = 128 * MIB
    rows = 34
    x = np.random.default_rng(4).integers(0, 2**32, (rows, MIB), dtype=np.uint32).view(np.float32)
    assert x.nbytes > limit
    idx = np.array([rows - 1, 0, rows - 2, rows // 2], np.uint32)
    try:
        b = ProgramBuilder(x, idx)
        same_bits(run_one(executor, b, b.index_select(0, x.shape, DType.F32, 0, 1, 4)), x[idx])
        flat = x.reshape(-1)
        gidx = np.arange(flat.size - 4096, flat.size, dtype=np.uint32)[::-3].copy()
        b = ProgramBuilder(flat, gidx)
        same_bits(run_one(executor, b, b.gather(0, flat.shape, DType.F32, 0, 1, gidx.shape)), flat[gidx])
        del flat, gidx
        u8 = x.view(np.uint8).reshape(-1)[: limit + 2 * MIB + 3][::-1]
        b = ProgramBuilder(u8)
        same_bits(run_one(executor, b, b.contiguize(0)), np.ascontiguousarray(u8))
    finally:
        pool.allocator.trim()
