"""The strided-reading select kernels (`vulkan_strided.md`): index_select and gather straight from
transposed, stepped, reversed, offset and broadcast sources, bit-exact against numpy on poisoned
outputs, in both memory modes and both position mappings; bad indices, guards, grid tiling,
64-bit positions, views of more dims than the shader takes, and a source past 128 MiB."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from vulkan_helpers import ALL_DTYPES, GUARD, PAD, POISON, REPO, carve, padded, random_array, raw, same_bits

import lazyfuel as lf
from lazyfuel.backends.vulkan.kernels import DeviceValue, StatusSlot
from lazyfuel.backends.vulkan.strided import MAX_STRIDED_RANK, index_select_dim, merge_around, walk_dim
from lazyfuel.contracts.model import OpKind
from lazyfuel.dtypes import DType
from lazyfuel.judge.workloads import program_for
from lazyfuel.layout import Layout
from lazyfuel.registry import Registry

STRIDED_MD = REPO / "lazyfuel" / "contracts" / "vulkan_strided.md"
MIB = 1 << 20


def _registry() -> Registry:
    from lazyfuel.backends.vulkan import register

    register()
    found = Registry()
    found.load(STRIDED_MD)
    return found


REGISTRY = _registry()


def binding(op: OpKind, dtype: DType):
    return next(b for b in REGISTRY.bindings() if b.op_kind is op and b.dtypes[0] is dtype)


def views(rng: np.random.Generator, dtype: DType, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Views of `shape` over fresh random bits: every awkward layout the kernels accept."""
    every = tuple(slice(None, None, -1) for _ in shape)
    stepped = random_array(rng, dtype, tuple(2 * n + 1 for n in shape))
    offset = random_array(rng, dtype, tuple(n + 2 for n in shape))
    small = tuple(1 if i % 2 == 0 else n for i, n in enumerate(shape))
    return {
        "contiguous": random_array(rng, dtype, shape),
        "transposed": random_array(rng, dtype, shape[::-1]).T,
        "stepped": stepped[tuple(slice(1, None, 2) for _ in shape)],
        "reversed": random_array(rng, dtype, shape)[every],
        "offset": offset[tuple(slice(2, None) for _ in shape)],
        "broadcast": np.broadcast_to(random_array(rng, dtype, small), shape),
        "mixed": stepped[tuple(slice(None, None, -2) if i % 2 else slice(1, 1 + n) for i, n in
                               enumerate(shape))],
    }


def index_select(executor, src: np.ndarray, dim: int, idx: np.ndarray) -> np.ndarray:
    work = program_for(binding(OpKind.IndexSelect, DType.from_numpy(src.dtype)), [src, idx], {"dim": dim})
    (out,) = executor.run(work.program, list(work.inputs))
    return out


def gather(executor, src: np.ndarray, dim: int, idx: np.ndarray) -> np.ndarray:
    work = program_for(binding(OpKind.Gather, DType.from_numpy(src.dtype)), [src, idx], {"dim": dim})
    (out,) = executor.run(work.program, list(work.inputs))
    return out


def check_both(executor, rng: np.random.Generator, src: np.ndarray) -> None:
    """index_select and gather along every dim of `src`, against numpy."""
    for dim in range(max(src.ndim, 1)):
        size = src.shape[dim] if src.ndim else 1
        idx = rng.integers(0, size, 2 * size + 1).astype(np.uint32)
        expected = np.take(raw(src), idx, axis=dim) if src.ndim else raw(src).reshape(1)[idx]
        same_bits(index_select(executor, src, dim, idx), expected.view(src.dtype))
        if not src.ndim:
            continue
        gshape = (*src.shape[:dim], size + 2, *src.shape[dim + 1:])
        gidx = rng.integers(0, size, gshape).astype(np.uint32)
        expected = np.take_along_axis(raw(src), gidx.astype(np.intp), axis=dim)
        same_bits(gather(executor, src, dim, gidx), expected.view(src.dtype))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_every_view_every_dim_ranks_one_to_four(executor, dtype):
    rng = np.random.default_rng(hash(dtype.name) % 2**32)
    for shape in [(7,), (5, 3), (3, 4, 5), (2, 3, 1, 5)]:
        for src in views(rng, dtype, shape).values():
            check_both(executor, rng, src)


@pytest.mark.usefixtures("memory_mode", "mapping")
@pytest.mark.parametrize("dtype", [DType.U8, DType.F16, DType.F32, DType.F64, DType.C128], ids=str)
def test_each_width_in_each_memory_mode_and_mapping(executor, dtype):
    rng = np.random.default_rng(hash(dtype.name) % 2**32 + 1)
    for shape in [(3, 4, 5)]:
        for src in views(rng, dtype, shape).values():
            check_both(executor, rng, src)


@pytest.mark.usefixtures("memory_mode")
@pytest.mark.parametrize("dtype", [DType.U8, DType.F16, DType.F32, DType.C128], ids=str)
def test_wide_words_for_dense_rows_and_odd_offsets(executor, dtype):
    """index_select moves rows as wider words where the innermost dim is dense; an odd offset or
    row length falls back to element words. Both agree with numpy."""
    rng = np.random.default_rng(11)
    base = random_array(rng, dtype, (9, 7, 32))
    for src in (base.transpose(1, 0, 2), base[:, ::2, 3:19], base[:, ::-1, 1:30], base[::2, :, :]):
        for dim in range(2):
            idx = rng.integers(0, src.shape[dim], 11).astype(np.uint32)
            same_bits(index_select(executor, src, dim, idx), np.take(raw(src), idx, axis=dim).view(src.dtype))


def test_one_element_empty_and_more_dims_than_the_shader_takes(executor):
    rng = np.random.default_rng(12)
    one = random_array(rng, DType.F64, (1,))
    check_both(executor, rng, one)
    empty = random_array(rng, DType.U8, (3, 0, 4))
    assert index_select(executor, empty, 0, np.array([2, 0], np.uint32)).shape == (2, 0, 4)
    assert index_select(executor, empty, 1, np.zeros(0, np.uint32)).shape == (3, 0, 4)
    deep = random_array(rng, DType.U32, (2, 3, 2, 3, 2, 3, 2, 5)).transpose(7, 6, 5, 4, 3, 2, 1, 0)[::-1]
    assert merge_around(Layout.of(deep), 3)[0].ndim > MAX_STRIDED_RANK  # contiguized on the device first
    check_both(executor, rng, deep)


@pytest.mark.parametrize("positions", ["32-bit", "64-bit"])
def test_split_grids_and_64_bit_positions(executor, pool, monkeypatch, positions, mapping):
    with lf.config(_force_wide=positions == "64-bit"):
        monkeypatch.setattr(pool, "max_groups", 3)
        rng = np.random.default_rng(13)
        src = random_array(rng, DType.F32, (161, 37)).T[::-1, ::2]
        before = pool.dispatches
        check_both(executor, rng, src)
        assert pool.dispatches - before >= 4 * 2, "grids were not split"


def test_merge_around_keeps_the_selected_dim_and_merges_each_side():
    lay = Layout((2, 3, 1, 4, 5), (60, 20, 7, 5, 1), 3)
    assert merge_around(lay, 2) == (Layout((6, 1, 20), (20, 7, 1), 3), 1)
    assert merge_around(lay, 0) == (Layout((2, 60), (60, 1), 3), 0)
    assert index_select_dim((2, 3, 1, 4), 6, 1, 4) == 2
    # invocations walk the densest source dim when it is not the innermost (a transpose: dim 0)
    assert walk_dim(Layout((4, 5), (1, 4), 0)) == 0
    assert walk_dim(Layout((4, 5), (5, 1), 0)) == -1  # row-major: the plain walk
    assert walk_dim(Layout((4, 5, 3), (0, 1, 20), 0)) == 1  # stride 0 (broadcast) never walks
    assert walk_dim(Layout((4, 5), (1, 0), 0)) == -1
    with pytest.raises(ValueError, match="do not describe a source of shape"):
        index_select_dim((2, 3), 2, 4, 1)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_view_any_dim(executor, data):
    """Random shapes, slices (any step, negative included), transposes and broadcasts."""
    rank = data.draw(st.integers(1, 4))
    shape = tuple(data.draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank)))
    dtype = data.draw(st.sampled_from([DType.U8, DType.BF16, DType.F32, DType.F64, DType.C128]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    src = random_array(rng, dtype, shape)
    key = tuple(slice(data.draw(st.integers(0, n - 1)), None, data.draw(st.sampled_from([1, 2, -1, -2])))
                for n in shape)
    src = src[key].transpose(data.draw(st.permutations(range(rank))))
    if data.draw(st.booleans()):
        src = np.broadcast_to(src[..., :1], (*src.shape[:-1], 3))
    if 0 not in src.shape:
        check_both(executor, rng, src)


def test_bad_indices_raise_index_error_naming_value_and_position(executor):
    src = np.arange(20, dtype=np.float32).reshape(4, 5).T  # (5, 4), transposed
    with pytest.raises(IndexError, match=r"index 4 at position 2 of the indices is out of range for an axis "
                                         r"of size 4"):
        index_select(executor, src, 1, np.array([0, 3, 4, 1], np.uint32))
    gidx = np.zeros((5, 2), np.uint32)
    gidx[3, 1] = 7
    with pytest.raises(IndexError, match=r"index 7 at position \(3, 1\) of the indices is out of range "
                                         r"for dim 1 of size 4"):
        gather(executor, src, 1, gidx)


def _guarded_run(pool, op: OpKind, base: np.ndarray, view: Layout, dim: int, idx: np.ndarray,
                 out_shape: tuple[int, ...]) -> tuple[np.ndarray, int]:
    """Run one strided step on `base`'s bytes seen through `view`, everything inside guard bytes;
    returns (output region with guards, status word)."""
    dtype = DType.from_numpy(base.dtype)
    b = binding(op, dtype)
    if op is OpKind.IndexSelect:
        params = (("outer_count", math.prod(view.shape[:dim])), ("source_dim_size", view.shape[dim]),
                  ("n_indices", idx.size), ("inner_count", math.prod(view.shape[dim + 1:])))
    else:
        params = (("source_shape", view.shape), ("output_shape", out_shape), ("dim", dim))
    from lazyfuel.planner.program import Step

    step = Step(b, (0, 1), params, out_shape, dtype)
    nbytes = math.prod(out_shape) * dtype.itemsize
    with pool.batch() as batch:
        values = []
        for a, lay in ((base, view), (idx, Layout.contiguous(idx.shape))):
            _, inner = carve(batch, a.nbytes)
            inner.host[:a.nbytes] = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
            values.append(DeviceValue(inner, DType.from_numpy(a.dtype), lay))
        outer, out = carve(batch, nbytes)
        out.host[:] = POISON
        status = batch.alloc(4)
        status.host[:4] = 0xFF
        b.kernel_ref.impl.record(batch, step, values, out, StatusSlot(status, 0))
        batch.barrier()
        batch.run()
        return outer.host.copy(), int(status.host[:4].view(np.uint32)[0])


@pytest.mark.usefixtures("memory_mode", "mapping")
def test_a_bad_index_reads_and_writes_nothing_and_guards_hold(pool):
    if not pool.allocator.direct:
        pytest.skip("guard tests read device memory directly; this device needs staging")
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    view = Layout.of(base.T[::-1])  # (6, 4): reversed rows of the transpose
    expected = base.T[::-1]
    idx = np.array([1, 4, 0, 9, 3], np.uint32)  # 4 and 9 are out of range for dim 1 (size 4)
    region, status = _guarded_run(pool, OpKind.IndexSelect, base, view, 1, idx, (6, 5))
    assert status == 1
    assert (region[:PAD] == GUARD).all() and (region[PAD + padded(120):] == GUARD).all()
    out = region[PAD:PAD + 120].view(np.float32).reshape(6, 5)
    assert (out[:, [1, 3]].view(np.uint32) == 0xA5A5A5A5).all(), "a bad index read or wrote something"
    same_bits(np.ascontiguousarray(out[:, [0, 2, 4]]), expected[:, [1, 0, 3]])
    gidx = np.array([[0, 1], [2, 3], [3, 8], [1, 1], [0, 0], [2, 2]], np.uint32)
    region, status = _guarded_run(pool, OpKind.Gather, base, view, 1, gidx, (6, 2))
    assert status == 5  # flat position of the 8
    out = region[PAD:PAD + 48].view(np.float32).reshape(6, 2)
    assert out.view(np.uint32)[2, 1] == 0xA5A5A5A5
    keep = np.ones((6, 2), bool)
    keep[2, 1] = False
    same_bits(out[keep], np.take_along_axis(expected, gidx.astype(np.intp) % 4, axis=1)[keep])


def test_a_view_reaching_outside_its_buffer_is_refused(pool):
    if not pool.allocator.direct:
        pytest.skip("guard tests read device memory directly; this device needs staging")
    base = np.arange(12, dtype=np.float32)
    with pytest.raises(ValueError, match="outside the 12-element source"):
        _guarded_run(pool, OpKind.IndexSelect, base, Layout((4, 4), (1, 3), 0), 0,
                     np.array([0], np.uint32), (1, 4))


@pytest.mark.slow
def test_a_transposed_source_past_128_mib(executor, pool):
    """A 136 MiB source (past lavapipe's maxStorageBufferRange, so the device-address shaders run)
    read transposed: rows and columns past the first 128 MiB are selected."""
    rows = 34
    x = np.random.default_rng(14).integers(0, 2**32, (rows, MIB), dtype=np.uint32).view(np.float32)
    assert x.nbytes > 128 * MIB
    view = x.T  # (MIB, 34)
    try:
        idx = np.array([MIB - 1, 0, MIB // 2, MIB - 7], np.uint32)
        same_bits(index_select(executor, view, 0, idx), x.T[idx])
        cols = np.array([rows - 1, 0, rows - 2], np.uint32)
        same_bits(index_select(executor, view[-4096:], 1, cols), x.T[-4096:][:, cols])
        gidx = np.full((8, rows), MIB - 1, np.uint32)
        same_bits(gather(executor, view, 0, gidx), np.take_along_axis(x.T, gidx.astype(np.intp), axis=0))
    finally:
        pool.allocator.trim()
