"""The `select_fill` binding (SelectFill: an index_select and the masked_fill of its result in one
dispatch): bit-equal to numpy and to the two kernels it replaces, for every dtype, rank and dim
whose rows are whole 16-byte words, with broadcast masks through a Contiguize step, 64-bit
positions, outputs in place and in page-locked host memory; bad indices are reported as the
select's, with nothing returned. The planner puts it in place of the pair on GPUs (its contract's
`device_kinds`), never on lavapipe unless it is pinned (`lf.config(pin_kernels=...)`), and never
where the select's result is also read or its rows are not whole 16-byte words (`misfit`); the
executor has no fusion logic of its own."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from vulkan_helpers import ALL_DTYPES, ProgramBuilder, random_array, same_bits

import lazyfuel as lf
from lazyfuel import profiling
from lazyfuel.backends.vulkan import executor as executor_module
from lazyfuel.contracts.model import Backend
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.planner import Planner
from lazyfuel.planner.chain import Chain, OpNode
from lazyfuel.providers import default_registry


@pytest.fixture(params=[True, False], ids=["fused", "two-kernels"])
def fuse(request):
    return request.param


def fill_bytes(dtype: DType, rng: np.random.Generator) -> tuple[bytes, np.ndarray]:
    value = random_array(rng, dtype, (1,))
    return value.tobytes(), value


def expected(x: np.ndarray, dim: int, idx: np.ndarray, mask: np.ndarray, value: np.ndarray) -> np.ndarray:
    picked = np.take(x.view(f"V{x.dtype.itemsize}"), idx.astype(np.int64), axis=dim)
    return np.where(mask, value.view(f"V{x.dtype.itemsize}")[0], picked).view(x.dtype)


def rows_case(seed: int, dtype: DType, shape: tuple[int, int], n_idx: int, density: float = 0.5):
    """Random rows `x`, row indices, an (n_idx, cols) mask set with `density`, a fill value."""
    rng = np.random.default_rng(seed)
    x = random_array(rng, dtype, shape)
    idx = rng.integers(0, shape[0], n_idx).astype(np.uint32)
    mask = rng.random((n_idx, shape[1])) < density
    return (x, idx, mask, *fill_bytes(dtype, rng))


def select_then_fill(x: np.ndarray, dim: int, idx: np.ndarray, mask: np.ndarray, fill: bytes,
                     fused: bool = False) -> tuple[ProgramBuilder, tuple[int, ...]]:
    """The program of the two kernels, or of the one select_fill step (`fused`)."""
    dt = DType.from_numpy(x.dtype)
    b = ProgramBuilder(x, idx, mask)
    m = b.input(2)  # a broadcast mask goes through a Contiguize step
    if fused:
        return b, (b.select_fill(0, x.shape, dt, dim, 1, idx.size, m, fill),)
    picked = b.index_select(0, x.shape, dt, dim, 1, idx.size)
    return b, (b.masked_fill(picked, b.steps[-1].out_shape, dt, m, fill),)


def chain_of(dim: int, value: float, outputs: str = "fill") -> Chain:
    """index_select(in0, dim, in1), then masked_fill of it by in2; returns the fill (or both)."""
    nodes = (OpNode("IndexSelect", (0, 1), (("dim", dim),)),
             OpNode("MaskedFill", (3, 2), (("value", value),)))
    return Chain(3, nodes, (4,) if outputs == "fill" else (3, 4))


def plan(chain: Chain, *arrays: np.ndarray, kind: str | None = "cpu"):
    """The Vulkan plan of `chain` on `arrays`, the device taken to be of `kind` (lavapipe: cpu)."""
    kinds = {Backend.Vulkan: kind} if kind else {}
    planner = Planner(default_registry(), [Backend.Vulkan], device_kinds=kinds)
    return planner.plan(chain, [DType.from_numpy(a.dtype) for a in arrays], [Layout.of(a) for a in arrays])


def op_kinds(program) -> list[str]:
    return [s.binding.op_kind.name for s in program.steps]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_every_dtype_fused_and_bit_equal(executor, fuse, dtype):
    rng = np.random.default_rng(int.from_bytes(dtype.name.encode(), "little") % 2**32)
    inner = max(1, 64 // dtype.itemsize)  # 64-byte rows: whole 16-byte words for every width
    x = random_array(rng, dtype, (3, 7, inner))
    idx = rng.integers(0, 7, 11).astype(np.uint32)
    mask = rng.random((3, 11, inner)) < 0.5
    fill, value = fill_bytes(dtype, rng)
    b, outs = select_then_fill(x, 1, idx, mask, fill, fuse)
    with lf.profile() as p:
        (got,) = executor.run(b.program(outs), b.inputs)
    same_bits(got, expected(x, 1, idx, mask, value))
    assert p.dispatches == (1 if fuse else 2)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_shapes_dims_and_broadcast_masks(executor, data):
    """Planned for a GPU, the pair is fused exactly where the rows are whole 16-byte words."""
    dtype = data.draw(st.sampled_from(ALL_DTYPES))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    ndim = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.integers(1, 5)) for _ in range(ndim))
    dim = data.draw(st.integers(0, ndim - 1))
    words = data.draw(st.integers(0, 3))  # rows of whole words (fused) or not (two kernels)
    row = math.prod(shape[dim + 1:]) * dtype.itemsize
    if words and dim == ndim - 1:
        shape = (*shape, 16 * words // dtype.itemsize)  # the last axis makes 16-byte rows
    elif words and row % 16:
        shape = (*shape[:-1], shape[-1] * 16 // math.gcd(row, 16))
    x = random_array(rng, dtype, shape)
    idx = rng.integers(0, shape[dim], data.draw(st.integers(1, 9))).astype(np.uint32)
    out_shape = (*shape[:dim], idx.size, *shape[dim + 1:])
    mshape = tuple(1 if data.draw(st.booleans()) else n for n in out_shape)
    mask = np.broadcast_to(rng.random(mshape) < 0.5, out_shape)
    fill, value = fill_bytes(dtype, rng)
    program = plan(chain_of(dim, 0.0), x, idx, mask, kind="discrete")
    fusable = math.prod(shape[dim + 1:]) * dtype.itemsize % 16 == 0
    assert ("SelectFill" in op_kinds(program)) == fusable
    fill_step = program.steps[-1]  # the value's bytes: the fill of these tests, not the chain's
    program = dataclasses.replace(program, steps=(*program.steps[:-1], dataclasses.replace(
        fill_step, params=tuple((k, fill if k == "fill_bytes" else v) for k, v in fill_step.params))))
    (got,) = executor.run(program, [x, idx, mask])
    same_bits(got, expected(x, dim, idx, np.ascontiguousarray(mask), value))


def test_sixty_four_bit_positions(executor, fuse):
    with lf.config(_force_wide=True):
        x, idx, mask, fill, value = rows_case(5, DType.F16, (40, 24), 33, density=0.3)
        b, outs = select_then_fill(x, 0, idx, mask, fill, fuse)
        (got,) = executor.run(b.program(outs), b.inputs)
        same_bits(got, expected(x, 0, idx, mask, value))


def test_a_bad_index_is_the_selects_error_and_nothing_comes_back(executor, fuse):
    x = np.arange(4 * 8, dtype=np.float32).reshape(4, 8)
    idx = np.array([0, 3, 9, 1, 2], np.uint32)
    mask = np.zeros((5, 8), np.bool_)
    b, outs = select_then_fill(x, 0, idx, mask, np.float32(2).tobytes(), fuse)
    out = np.full((5, 8), np.nan, np.float32)
    with pytest.raises(IndexError, match=r"index_select: index 9 at position 2 of the indices is out of "
                                         r"range for an axis of size 4"):
        executor.run(b.program(outs), b.inputs, out=[out])
    idx[2] = 2  # and the next run is fine
    (got,) = executor.run(b.program(outs), b.inputs)
    same_bits(got, x[idx])


def test_pairs_it_cannot_take_are_planned_as_two_kernels():
    """The select's result also returned, or rows that are not whole 16-byte words: the pair, even
    on a GPU and with the kernel pinned; a backend without the binding (numpy) keeps the pair."""
    x, idx, mask, _, _ = rows_case(9, DType.F32, (6, 4), 5)
    pair = ["IndexSelect", "MaskedFill"]
    with lf.config(pin_kernels=["select_fill"]):
        assert op_kinds(plan(chain_of(0, -1.0, outputs="both"), x, idx, mask)) == pair
        x3 = random_array(np.random.default_rng(10), DType.F32, (6, 3))  # rows of 12 bytes
        mask3 = np.ascontiguousarray(mask[:, :3])
        assert op_kinds(plan(chain_of(0, -1.0), x3, idx, mask3, kind="discrete")) == pair
        assert op_kinds(plan(chain_of(0, -1.0), x, idx, mask)) == ["SelectFill"]
        cpu = Planner(default_registry(), [Backend.Cpu]).plan(
            chain_of(0, -1.0), [DType.F32, DType.U32, DType.BOOL], [Layout.of(a) for a in (x, idx, mask)])
        assert op_kinds(cpu) == pair and not any(
            "masked_fill (chain" in c.what for c in cpu.choices)


def test_the_device_kind_decides_unless_a_kernel_is_pinned():
    """Today's rule, now the contract's `device_kinds`: fused on a GPU, the pair on lavapipe (a cpu
    device) or where the planner is not told the kind; a pin overrides it either way."""
    x, idx, mask, _, _ = rows_case(3, DType.F32, (16, 8), 12)
    for kind in ("discrete", "integrated", "virtual", "other"):
        assert op_kinds(plan(chain_of(0, 1.0), x, idx, mask, kind=kind)) == ["SelectFill"]
    assert op_kinds(plan(chain_of(0, 1.0), x, idx, mask, kind="cpu")) == ["IndexSelect", "MaskedFill"]
    assert op_kinds(plan(chain_of(0, 1.0), x, idx, mask, kind=None)) == ["IndexSelect", "MaskedFill"]
    with lf.config(pin_kernels=["select_fill"]):
        assert op_kinds(plan(chain_of(0, 1.0), x, idx, mask, kind="cpu")) == ["SelectFill"]
    with lf.config(pin_kernels="index_select,masked_fill"):
        program = plan(chain_of(0, 1.0), x, idx, mask, kind="discrete")
        assert op_kinds(program) == ["IndexSelect", "MaskedFill"]
        assert "not taken: a kernel of the pair is pinned" in program.choices[-1].candidates[1].note
    with lf.config(pin_kernels=["no_such_kernel"]), pytest.raises(ValueError, match=r"pin_kernels names "
                                                                   r"no_such_kernel, which no binding has"):
        plan(chain_of(0, 1.0), x, idx, mask)


def test_the_executor_has_no_fusion_logic():
    """It runs a Program and nothing else: no peephole, no switch (the planner fuses)."""
    source = Path(executor_module.__file__).read_text()
    assert "select_fills" not in source and "SelectFill" not in source and "_fuse_select_fill" not in source
    assert "_fuse_select_fill" not in lf.config.values()


def test_explain_shows_the_fused_binding_and_the_pair_it_replaced(vulkan):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((32, 16)).astype(np.float32)
    y = lf.masked_fill(lf.index_select(lf.from_array(a, chunks=(16, 16)), 0, rng.integers(0, 32, 24)),
                       rng.random((24, 1)) < 0.5, -1.0)
    with lf.config(pin_kernels=["select_fill"]):
        text = lf.explain(y)
    assert "SelectFill" in text and "select_fill [lazyfuel-glsl]" in text
    assert "index_select + masked_fill (chain nodes" in text
    assert "index_select [" in text and "+ masked_fill" in text  # the pair, priced beside it
    assert "SelectFill" not in lf.explain(y)  # lavapipe: the pair


def test_into_out_arrays_and_page_locked_memory(executor, fuse):
    rng = np.random.default_rng(13)
    x = lf.empty_pinned((64, 32), np.float32)
    x[...] = random_array(rng, DType.F32, (64, 32))
    idx = rng.permutation(64).astype(np.uint32)
    mask = np.broadcast_to(rng.random((64, 1)) < 0.5, (64, 32))
    fill, value = fill_bytes(DType.F32, rng)
    b, outs = select_then_fill(x, 0, idx, mask, fill, fuse)
    want = expected(np.asarray(x), 0, idx, np.ascontiguousarray(mask), value)
    for out in (np.full((64, 32), np.nan, np.float32), lf.empty_pinned((64, 32), np.float32)):
        out[...] = np.nan
        (got,) = executor.run(b.program(outs), b.inputs, out=[out])
        assert got is out
        same_bits(got, want)


def test_the_lazy_pipeline_counts_one_dispatch_fewer(vulkan):
    rng = np.random.default_rng(17)
    a = rng.standard_normal((64, 16)).astype(np.float32)
    idx = rng.integers(0, 64, 48)
    mask = rng.random((48, 1)) < 0.5
    y = lf.masked_fill(lf.index_select(lf.from_array(a, chunks=(16, 16)), 0, idx), mask, -1.0)
    counts = {}
    for fused in (False, True):
        with lf.config(pin_kernels=["select_fill_broadcast"] if fused else []), profiling.profile() as p:
            got = y.compute()
        counts[fused] = (p.dispatches, p.submits)
        same_bits(got, np.where(mask, np.float32(-1), a[idx]))
    blocks = len(y.chunks[0])
    assert counts[False][0] - counts[True][0] == blocks  # one dispatch fewer per block
    assert counts[False][1] == counts[True][1] == blocks  # one submit per block either way


@pytest.mark.parametrize("pin", [[], ["select_fill"], ["index_select_strided", "masked_fill"]],
                         ids=["costs", "fused-pinned", "strided-pair-pinned"])
def test_a_strided_source_is_never_read_as_contiguous_by_the_fused_kernel(executor, pin):
    """On main the executor fused a strided-source index_select (index_select_strided) with its
    masked_fill on GPUs and the fused kernel read the view as if contiguous: wrong bits. Planned,
    select_fill reads a contiguous source only (a Contiguize step first), or the pair runs."""
    rng = np.random.default_rng(31)
    base = random_array(rng, DType.F32, (32, 64))
    x = base.T  # (64, 32): rows of 128 bytes, strided
    idx = rng.integers(0, 64, 20).astype(np.uint32)
    mask = rng.random((20, 32)) < 0.5
    with lf.config(pin_kernels=pin):
        program = plan(chain_of(0, 0.0), x, idx, mask, kind="discrete")
    if "masked_fill" in pin:  # the pair main's executor fused behind the planner's back
        assert [s.binding.contract.kernel for s in program.steps] == ["index_select_strided", "masked_fill"]
    for step in program.steps:
        if step.binding.op_kind.name == "SelectFill":
            assert step.args[0] >= program.n_inputs  # a Contiguize step's result, not the view
    (got,) = executor.run(program, [x, idx, mask])
    same_bits(got, np.where(mask, np.float32(0), x[idx]))
