"""masked_fill and select_fill reading a broadcast mask in place (`fill_kernels`, `mask_reading`,
`contracts/vulkan_broadcast.md`; issue 18, W3): bit-equal to numpy's `np.where(mask, fill, x[idx])`
for every dtype, row, column and (1, 1) masks, ranks 1-4, both memory modes and both mappings of
positions to invocations (lavapipe's and a GPU's), 64-bit positions, on
the poisoned pool; one dispatch and only the small mask uploaded; a mask breaking the caps is
refused. Through the lazy API: resident data, masks as numpy, lazyfuel and
resident arrays, mask chunks that do not line up with the data's, and the plan with no Contiguize
step (on main the row mask was widened by one)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from vulkan_helpers import ALL_DTYPES, random_array, same_bits

import lazyfuel as lf
from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.planner import Planner
from lazyfuel.planner.chain import Chain, OpNode
from lazyfuel.planner.program import Program, Step
from lazyfuel.providers import default_registry

pytestmark = pytest.mark.usefixtures("memory_mode", "mapping")  # storage / address x CPU / GPU mapping


def binding(op: OpKind, dtypes: tuple[DType, ...], kernel: str):
    for b in default_registry().bindings():
        if b.op_kind is op and b.dtypes == dtypes and b.contract.kernel == kernel:
            return b
    raise LookupError(f"no {kernel} binding for {dtypes}")


def fill_of(dtype: DType, rng: np.random.Generator) -> tuple[bytes, np.ndarray]:
    value = random_array(rng, dtype, (1,))
    return value.tobytes(), value


def where(mask: np.ndarray, value: np.ndarray, data: np.ndarray) -> np.ndarray:
    """np.where on the elements' bits (floats never compared)."""
    width = data.dtype.itemsize
    return np.where(mask, value.view(f"V{width}")[0], data.view(f"V{width}")).view(data.dtype)


def masked_fill_program(data: np.ndarray, mask: np.ndarray, fill: bytes,
                        kernel: str = "masked_fill_broadcast") -> Program:
    """One MaskedFill step reading both inputs as they are (the mask may be a broadcast view)."""
    dt = DType.from_numpy(data.dtype)
    step = Step(binding(OpKind.MaskedFill, (dt, DType.BOOL, dt), kernel), (0, 1), (("fill_bytes", fill),),
                data.shape, dt)
    return Program((dt, DType.BOOL), (Layout.of(data), Layout.of(mask)), (step,), (2,))


def select_fill_program(x: np.ndarray, idx: np.ndarray, mask: np.ndarray, fill: bytes, dim: int) -> Program:
    """One SelectFill step (select_fill_broadcast) reading its inputs as they are."""
    dt = DType.from_numpy(x.dtype)
    params = (("outer_count", math.prod(x.shape[:dim])), ("source_dim_size", x.shape[dim]),
              ("n_indices", idx.size), ("inner_count", math.prod(x.shape[dim + 1:])), ("fill_bytes", fill))
    out = (*x.shape[:dim], idx.size, *x.shape[dim + 1:])
    step = Step(binding(OpKind.SelectFill, (dt, DType.U32, DType.BOOL, dt), "select_fill_broadcast"),
                (0, 1, 2), params, out, dt)
    return Program((dt, DType.U32, DType.BOOL), tuple(Layout.of(a) for a in (x, idx, mask)), (step,), (3,))


def broadcast_mask(rng: np.random.Generator, small: tuple[int, ...], shape: tuple[int, ...]) -> np.ndarray:
    return np.broadcast_to(rng.random(small) < 0.5, shape)


MASKS = {"row": lambda n, c: (n, 1), "column": lambda n, c: (1, c), "one": lambda n, c: (1, 1)}


@pytest.mark.parametrize("cols", [48, 5, 3], ids=["rows-of-words", "odd-rows", "short-rows"])
@pytest.mark.parametrize("kind", MASKS)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_masked_fill_reads_row_column_and_single_masks_in_place(executor, dtype, kind, cols):
    rng = np.random.default_rng(int.from_bytes(f"{dtype.name}{kind}{cols}".encode(), "little") % 2**32)
    data = random_array(rng, dtype, (37, cols))
    mask = broadcast_mask(rng, MASKS[kind](37, cols), data.shape)
    fill, value = fill_of(dtype, rng)
    with lf.profile() as p:
        (got,) = executor.run(masked_fill_program(data, mask, fill), [data, mask])
    same_bits(got, where(mask, value, data))
    assert p.dispatches == 1  # no Contiguize of the mask
    assert p.bytes_uploaded <= data.nbytes + 16 * math.prod(MASKS[kind](37, cols))  # the small mask


@pytest.mark.parametrize("small", [(5, 1, 7), (1, 6, 1), (5, 6, 1), (1, 1, 7), (1, 1, 1)], ids=str)
@pytest.mark.parametrize("dtype", [DType.U8, DType.F16, DType.F32, DType.C128], ids=str)
def test_rank_three_masks(executor, dtype, small):
    rng = np.random.default_rng(sum(small) * dtype.itemsize)
    data = random_array(rng, dtype, (5, 6, 7))
    mask = broadcast_mask(rng, small, data.shape)
    fill, value = fill_of(dtype, rng)
    (got,) = executor.run(masked_fill_program(data, mask, fill), [data, mask])
    same_bits(got, where(mask, value, data))


def test_rank_four_masks_and_a_lower_rank_mask(executor):
    rng = np.random.default_rng(4)
    data = random_array(rng, DType.I16, (3, 4, 5, 8))
    fill, value = fill_of(DType.I16, rng)
    for small in [(3, 1, 5, 1), (1, 4, 1, 8), (3, 1, 1, 8), (5, 8), (4, 1, 1)]:
        mask = broadcast_mask(rng, small, data.shape)  # (5, 8) and (4, 1, 1): numpy's lower-rank rule
        (got,) = executor.run(masked_fill_program(data, mask, fill), [data, mask])
        same_bits(got, where(mask, value, data))


def test_a_mask_breaking_the_caps_is_refused_by_the_executor(executor):
    """A transposed or reversed mask is no broadcast of a dense array: the binding's caps reject it
    and the executor refuses it, naming the cap (the planner contiguizes such a mask first)."""
    rng = np.random.default_rng(8)
    data = random_array(rng, DType.F32, (6, 10))
    transposed, reversed_rows = (rng.random((10, 6)) < 0.5).T, (rng.random((6, 10)) < 0.5)[::-1]
    refused = [(transposed, "strided"), (reversed_rows, "start_offset")]
    for mask, cap in refused:
        with pytest.raises(ValueError, match=rf"argument 1 has layout .*\({cap}: rejected\); insert a "):
            executor.run(masked_fill_program(data, mask, fill_of(DType.F32, rng)[0]), [data, mask])


def test_sixty_four_bit_positions(executor):
    rng = np.random.default_rng(64)
    with lf.config(_force_wide=True):
        for small in [(40, 1), (1, 24), (1, 1)]:
            data = random_array(rng, DType.F16, (40, 24))
            mask = broadcast_mask(rng, small, data.shape)
            fill, value = fill_of(DType.F16, rng)
            (got,) = executor.run(masked_fill_program(data, mask, fill), [data, mask])
            same_bits(got, where(mask, value, data))
            idx = rng.integers(0, 40, 40).astype(np.uint32)  # rows of 48 bytes: whole words
            (got,) = executor.run(select_fill_program(data, idx, mask, fill, 0), [data, idx, mask])
            same_bits(got, where(mask, value, data[idx]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_broadcast_of_a_smaller_mask_is_bit_equal_to_numpy(executor, data):
    """Random dtypes, ranks 1-4, extents and broadcast patterns (numpy's rules: a mask of lower rank
    too); masked_fill and, where the rows are whole 16-byte words, select_fill."""
    dtype = data.draw(st.sampled_from(ALL_DTYPES))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    ndim = data.draw(st.integers(1, 4))
    shape = tuple(data.draw(st.integers(1, 9)) for _ in range(ndim))
    small = tuple(1 if data.draw(st.booleans()) else n for n in shape)[data.draw(st.integers(0, ndim - 1)):]
    x = random_array(rng, dtype, shape)
    mask = broadcast_mask(rng, small, shape)
    fill, value = fill_of(dtype, rng)
    (got,) = executor.run(masked_fill_program(x, mask, fill), [x, mask])
    same_bits(got, where(mask, value, x))
    dim = data.draw(st.integers(0, ndim - 1))
    inner = 16 // math.gcd(16, math.prod(shape[dim + 1:]) * dtype.itemsize)  # rows of whole words
    src = random_array(rng, dtype, (*shape[:-1], shape[-1] * inner) if dim < ndim - 1 else
                       (*shape, 16 // dtype.itemsize))
    idx = rng.integers(0, src.shape[dim], data.draw(st.integers(1, 7))).astype(np.uint32)
    out_shape = (*src.shape[:dim], idx.size, *src.shape[dim + 1:])
    small = tuple(1 if data.draw(st.booleans()) else n for n in out_shape)
    mask = broadcast_mask(rng, small, out_shape)
    (got,) = executor.run(select_fill_program(src, idx, mask, fill, dim), [src, idx, mask])
    same_bits(got, where(mask, value, np.take(src, idx.astype(np.int64), axis=dim)))


@pytest.mark.parametrize("kind", MASKS)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_select_fill_reads_the_mask_in_place(executor, dtype, kind):
    rng = np.random.default_rng(int.from_bytes(f"{dtype.name}{kind}".encode(), "little") % 2**32)
    cols = 64 // dtype.itemsize  # rows of 64 bytes: whole 16-byte words
    x = random_array(rng, dtype, (30, cols))
    idx = rng.integers(0, 30, 21).astype(np.uint32)
    mask = broadcast_mask(rng, MASKS[kind](21, cols), (21, cols))
    fill, value = fill_of(dtype, rng)
    with lf.profile() as p:
        (got,) = executor.run(select_fill_program(x, idx, mask, fill, 0), [x, idx, mask])
    same_bits(got, where(mask, value, x[idx]))
    assert p.dispatches == 1


def chain(value: float) -> Chain:
    nodes = (OpNode("IndexSelect", (0, 1), (("dim", 0),)), OpNode("MaskedFill", (3, 2), (("value", value),)))
    return Chain(3, nodes, (4,))


@pytest.mark.parametrize("kind", ["cpu", "discrete"])
def test_the_row_mask_plan_has_no_contiguize_step(kind):
    """W3's chain with a (N, 1) mask: on main the planner widened the mask with a Contiguize step
    (the contiguous-mask bindings were the only ones); now a binding reads it as it is, fused on a
    GPU, and the link carries the mask's N bytes."""
    x = np.zeros((256, 64), np.float32)
    idx = np.arange(256, dtype=np.uint32)
    mask = np.broadcast_to(np.zeros((256, 1), np.bool_), (256, 64))
    planner = Planner(default_registry(), [Backend.Vulkan], device_kinds={Backend.Vulkan: kind})
    layouts = [Layout.of(a) for a in (x, idx, mask)]
    program = planner.plan(chain(-1.0), [DType.F32, DType.U32, DType.BOOL], layouts)
    kernels = [s.binding.contract.kernel for s in program.steps]
    assert "Contiguize" not in [s.binding.op_kind.name for s in program.steps]
    fused = kind == "discrete"
    assert kernels == (["select_fill_broadcast"] if fused else ["index_select", "masked_fill_broadcast"])
    ((_, up, _),) = program.links
    assert up == (x.nbytes, idx.nbytes, 256)  # the mask's own bytes, not 256 x 64


@pytest.fixture
def w3():
    """W3 small: resident x in 4 blocks, indices permuted within each block, a row mask."""
    rng = np.random.default_rng(3)
    host = rng.standard_normal((512, 64), dtype=np.float32)
    idx = np.concatenate([s + rng.permutation(128) for s in range(0, 512, 128)])
    mask = rng.random((512, 1)) < 0.5
    return host, idx, mask, np.where(mask, np.float32(-1), host[idx])


@pytest.mark.parametrize("given", ["numpy", "lazyfuel", "lazyfuel-unaligned", "resident",
                                   "resident-unaligned"])
def test_resident_data_and_masks_given_every_way(vulkan, w3, given):
    host, idx, mask, want = w3
    x = lf.from_array(host, chunks=(128, 64)).persist(device=True)
    masks = {"numpy": lambda: mask, "lazyfuel": lambda: lf.from_array(mask, chunks=(128, 1)),
             "lazyfuel-unaligned": lambda: lf.from_array(mask, chunks=(100, 1)),
             "resident": lambda: lf.from_array(mask, chunks=(128, 1)).persist(device=True),
             "resident-unaligned": lambda: lf.from_array(mask, chunks=(200, 1)).persist(device=True)}
    y = x.index_select(0, idx).masked_fill(masks[given](), -1.0)
    text = lf.explain(y)
    assert "Contiguize step(s) inserted" not in text and "= Contiguize(" not in text
    assert "masked_fill_broadcast [lazyfuel-glsl-broadcast]" in text
    if not given.startswith("resident"):
        assert "bytes per link: Vulkan up 640 B (2 array(s))" in text  # a block: 128 indices, 128 mask bytes
    with lf.profile() as p:
        kept = y.persist(device=True)
    same_bits(kept.compute(), want)
    assert "Contiguize" not in str(p)
    if given == "resident":  # the mask's blocks read where they lie, through their broadcast view
        assert p.bytes_uploaded == idx.size * 4 and p.bytes_downloaded == 0
    else:  # the indices and the small mask (a rechunked resident mask: through host memory)
        assert p.bytes_uploaded == idx.size * 4 + mask.size


def test_a_column_mask_over_chunks_of_both_axes(vulkan):
    rng = np.random.default_rng(11)
    host = random_array(rng, DType.F16, (90, 40))
    mask = rng.random((1, 40)) < 0.5
    y = lf.from_array(host, chunks=(32, 16)).masked_fill(lf.from_array(mask, chunks=(1, 24)), 2.0)
    assert "= Contiguize(" not in lf.explain(y)
    same_bits(y.compute(), where(mask, np.array([2.0], np.float16), host))


@pytest.mark.parametrize("cols", [8, 5], ids=["rows-of-words", "odd-rows"])
@pytest.mark.parametrize("kind", MASKS)
def test_nothing_outside_the_output_is_written(pool, kind, cols):
    """The kernel recorded by hand with guard bytes around every buffer and the output poisoned:
    the output's bytes are numpy's, the guards after it untouched (the last 16-byte word covers
    padding inside the rounded buffer only), the small mask read where it lies."""
