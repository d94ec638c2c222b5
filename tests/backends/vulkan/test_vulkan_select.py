"""index_select, gather and masked_fill on the device, bit-exact against numpy.

Every dtype, ranks 1–4, every dim, contiguous and awkward inputs (resolved by a Contiguize step in
the same command buffer), empty tensors, odd element counts, NaN payloads, -0.0 and subnormals.
"""

from __future__ import annotations

import numpy as np
import pytest
from vulkan_helpers import (
    ALL_DTYPES,
    VIEW_KINDS,
    ProgramBuilder,
    make_view,
    random_array,
    raw,
    run_one,
    same_bits,
)

from lazyfuel.dtypes import DType
from lazyfuel.profiling import profile

pytestmark = pytest.mark.usefixtures("memory_mode")

SHAPES = {1: (7,), 2: (3, 5), 3: (2, 3, 5), 4: (2, 3, 1, 5)}
RANKS = sorted(SHAPES)


def index_select(executor, x: np.ndarray, dim: int, idx: np.ndarray, kernel: str | None = None) -> np.ndarray:
    """Run index_select by the first binding for its dtypes, or the one of contract kernel `kernel`."""
    b = ProgramBuilder(x, idx)
    src, iv = b.input(0), b.input(1)
    dt = DType.from_numpy(x.dtype)
    return run_one(executor, b, b.index_select(src, x.shape, dt, dim, iv, idx.size, kernel))


def gather(executor, x: np.ndarray, dim: int, idx: np.ndarray, kernel: str | None = None) -> np.ndarray:
    """Run gather by the first binding for its dtypes, or the one of contract kernel `kernel`."""
    b = ProgramBuilder(x, idx)
    src, iv = b.input(0), b.input(1)
    return run_one(executor, b, b.gather(src, x.shape, DType.from_numpy(x.dtype), dim, iv, idx.shape,
                                         kernel))


def masked_fill(executor, x: np.ndarray, mask: np.ndarray, fill: bytes) -> np.ndarray:
    b = ProgramBuilder(x, mask)
    data, m = b.input(0), b.input(1)
    return run_one(executor, b, b.masked_fill(data, x.shape, DType.from_numpy(x.dtype), m, fill))


def expected_fill(x: np.ndarray, mask: np.ndarray, fill: bytes) -> np.ndarray:
    value = np.frombuffer(fill, f"V{x.dtype.itemsize}")[0]
    return np.where(mask, value, raw(x)).view(x.dtype)


@pytest.mark.parametrize("rank", RANKS)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_index_select_every_dim(executor, dtype, rank):
    rng = np.random.default_rng(100 * rank + list(DType).index(dtype))
    shape = SHAPES[rank]
    for dim in range(rank):
        for kind in ("contiguous", VIEW_KINDS[1 + (dim + rank) % (len(VIEW_KINDS) - 1)]):
            x = make_view(rng, dtype, shape, kind)
            idx = rng.integers(0, shape[dim], 6).astype(np.uint32)
            same_bits(index_select(executor, x, dim, idx), np.take(raw(x), idx, axis=dim).view(x.dtype))


@pytest.mark.parametrize("rank", RANKS)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_gather_every_dim(executor, dtype, rank):
    rng = np.random.default_rng(200 * rank + list(DType).index(dtype))
    shape = SHAPES[rank]
    for dim in range(rank):
        for kind in ("contiguous", VIEW_KINDS[1 + (dim + 2 * rank) % (len(VIEW_KINDS) - 1)]):
            x = make_view(rng, dtype, shape, kind)
            out_shape = tuple(3 if d == dim else n for d, n in enumerate(shape))
            idx = rng.integers(0, shape[dim], out_shape).astype(np.uint32)
            idx_view = idx if kind == "contiguous" else np.ascontiguousarray(idx.T).T
            same_bits(gather(executor, x, dim, idx_view),
                      np.take_along_axis(raw(x), idx.astype(np.intp), axis=dim).view(x.dtype))


@pytest.mark.parametrize("rank", RANKS)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_masked_fill(executor, dtype, rank):
    rng = np.random.default_rng(300 * rank + list(DType).index(dtype))
    shape = SHAPES[rank]
    for kind in VIEW_KINDS:
        x = make_view(rng, dtype, shape, kind)
        mask = make_view(rng, DType.BOOL, shape, VIEW_KINDS[(VIEW_KINDS.index(kind) + 3) % len(VIEW_KINDS)])
        fill = random_array(rng, dtype, ()).tobytes()
        same_bits(masked_fill(executor, x, mask, fill), expected_fill(x, mask, fill))


@pytest.mark.parametrize("dtype", [DType.U8, DType.BOOL, DType.F16, DType.BF16, DType.I8, DType.U16], ids=str)
@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 7, 9, 13, 255, 257, 1021])
def test_odd_counts_of_narrow_dtypes(executor, dtype, n):
    rng = np.random.default_rng(n)
    x = random_array(rng, dtype, (n,))
    idx = rng.integers(0, n, n).astype(np.uint32)
    same_bits(index_select(executor, x, 0, idx), np.take(raw(x), idx).view(x.dtype))
    same_bits(gather(executor, x, 0, idx), np.take(raw(x), idx).view(x.dtype))
    mask = rng.integers(0, 2, n).astype(bool)
    fill = random_array(rng, dtype, ()).tobytes()
    same_bits(masked_fill(executor, x, mask, fill), expected_fill(x, mask, fill))
    rows = random_array(rng, dtype, (3, n))
    ridx = np.array([2, 0, 2, 1, 1], np.uint32)
    same_bits(index_select(executor, rows, 0, ridx), np.take(raw(rows), ridx, axis=0).view(rows.dtype))


@pytest.mark.parametrize("dtype", [DType.F16, DType.BF16, DType.F32, DType.F64], ids=str)
def test_special_bit_patterns_survive(executor, dtype):
    w = dtype.itemsize
    words = {2: [0x7C01, 0xFE42, 0x7F81, 0x8000, 0x0001, 0x03FF, 0xFFFF],
             4: [0x7FA00001, 0xFFC12345, 0x80000000, 0x00000001, 0x007FFFFF, 0xFF800000, 0x7F800001],
             8: [0x7FF4000000000001, 0xFFF8DEADBEEF0001, 0x8000000000000000, 1, 0x000FFFFFFFFFFFFF,
                 0xFFF0000000000000, 0x7FF0000000000001]}[w]
    x = np.array(words, f"u{w}").view(dtype.numpy)
    idx = np.arange(len(words))[::-1].astype(np.uint32)
    same_bits(index_select(executor, x, 0, idx), x[::-1])
    same_bits(gather(executor, x, 0, idx), x[::-1])
    fill = np.array([words[0]], f"u{w}").tobytes()  # a signalling NaN with a payload as the fill
    mask = np.array([True, False] * 3 + [True])
    same_bits(masked_fill(executor, x, mask, fill), expected_fill(x, mask, fill))
    same_bits(masked_fill(executor, x[::-2], mask[:4], fill), expected_fill(x[::-2], mask[:4], fill))


@pytest.mark.parametrize("dtype", [DType.U8, DType.F32, DType.C128], ids=str)
def test_empty(executor, dtype):
    rng = np.random.default_rng(5)
    x = random_array(rng, dtype, (3, 4))
    none = np.zeros(0, np.uint32)
    same_bits(index_select(executor, x, 1, none), np.empty((3, 0), dtype.numpy))
    empty = random_array(rng, dtype, (0, 4))
    same_bits(index_select(executor, empty, 1, np.array([3, 1], np.uint32)), np.empty((0, 2), dtype.numpy))
    same_bits(gather(executor, x, 0, np.zeros((0, 4), np.uint32)), np.empty((0, 4), dtype.numpy))
    same_bits(masked_fill(executor, empty, np.zeros((0, 4), bool), bytes(dtype.itemsize)), empty)


def test_chain_keeps_intermediates_on_the_device(executor, pool):
    """view → Contiguize → index_select → masked_fill → gather, one submit, only the end comes back."""
    rng = np.random.default_rng(11)
    x = random_array(rng, DType.F32, (4, 8))[::-1, ::2]
    idx = np.array([3, 0, 2], np.uint32)
    mask = np.broadcast_to(np.array([True, False, False]), (4, 3))
    rows = np.array([[3, 0, 1], [0, 0, 2]], np.uint32)
    fill = np.float32(-0.0).tobytes()
    b = ProgramBuilder(x, idx, mask, rows)
    src, iv, mv, rv = (b.input(i) for i in range(4))
    sel = b.index_select(src, (4, 4), DType.F32, 1, iv, 3)
    filled = b.masked_fill(sel, (4, 3), DType.F32, mv, fill)
    out = b.gather(filled, (4, 3), DType.F32, 0, rv, (2, 3))
    submits = pool.submits
    with profile() as p:
        (got,) = executor.run(b.program((out,)), b.inputs)
    assert pool.submits == submits + 1
    assert (p.programs, p.submits, p.dispatches) == (1, 1, 5)  # 2 contiguizes + 3 selects
    assert p.bytes_downloaded == got.nbytes and p.bytes_uploaded >= x.nbytes + idx.nbytes + rows.nbytes
    gather_binding = "(Gather,[F32,U32,F32],Vulkan) vulkan-slang -> fuel_vulkan_backend::fkc::gather_f32"
    assert p.bindings[gather_binding] == 1 and p.device_seconds > 0
    step1 = np.take(np.ascontiguousarray(x), idx, axis=1)
    step2 = np.where(mask, np.float32(-0.0), step1)
    same_bits(got, np.take_along_axis(step2, rows.astype(np.intp), axis=0))


def test_several_outputs_and_an_input_as_output(executor):
    rng = np.random.default_rng(12)
    x = random_array(rng, DType.U32, (5, 3))
    idx = np.array([4, 4, 0], np.uint32)
    b = ProgramBuilder(x, idx)
    src, iv = b.input(0), b.input(1)
    sel = b.index_select(src, x.shape, DType.U32, 0, iv, 3)
    first, second, again = executor.run(b.program((sel, 0, sel)), b.inputs)
    same_bits(first, x[idx])
    same_bits(second, x)
    same_bits(again, x[idx])
    assert first is not again


@pytest.mark.parametrize("groups", [(64, 4), (32, 8), (128, 16)], ids=lambda g: f"{g[0]}x{g[1]}")
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_gather_in_quads_under_every_mapping_and_group_size(executor, pool, mapping, dtype, groups,
                                                            monkeypatch):
    """Quads of 4 outputs (the GPU path) straddle rows and the end; other group sizes too."""
    monkeypatch.setitem(pool.groups, "gather", groups)
    rng = np.random.default_rng(groups[0] + list(DType).index(dtype))
    for shape, dim, m in (((7, 5), 1, 3), ((7, 5), 0, 9), ((3, 4, 6), 1, 5), ((1021,), 0, 1021),
                          ((2, 1030), 1, 1027)):
        x = random_array(rng, dtype, shape)
        out_shape = tuple(m if d == dim else n for d, n in enumerate(shape))
        idx = rng.integers(0, shape[dim], out_shape).astype(np.uint32)
        same_bits(gather(executor, x, dim, idx),
                  np.take_along_axis(raw(x), idx.astype(np.intp), axis=dim).view(x.dtype))
