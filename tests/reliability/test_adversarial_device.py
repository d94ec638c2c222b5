"""Adversarial indices and masks straight at the executors: no read outside the source, ever.

The executors do not range-check indices on the host (the graph layer does); on the device the
kernels' own bounds check is all that stands between a bad index and memory outside the source.
These tests feed the Vulkan and Cpu executors U32 indices near every bound (the axis length,
2**31, 2**32 - 1, negative int64 values cast to uint32 …), directly and as values computed on the
device (an index_select of an index table: nothing on the host ever sees them), and check:

1. kernel level (tests/backends/vulkan/test_vulkan_kernels_bounds.py goes further here: hypothesis over
   values, dtypes of every width, ranks, dims, both memory modes and both invocation mappings):
   each buffer sits inside a larger allocation whose surroundings hold a guard byte and whose
   source bytes never do; the status word names the first bad position; every output element of
   a good index equals numpy's; every element of a bad index is left unwritten (poison); no guard
   byte appears in the output and none around it changes;
2. executor level: the source is a slice of a larger host array filled with a sentinel byte the
   data never holds, imported as it is (zero-copy: the device buffer covers the slice's pages, so
   the sentinel sits right after the data on the device too) or copied; any bad index gives
   IndexError naming its value and first position and returns nothing, a good one (up to the axis
   length - 1, at the very end of the slice) gives numpy's result with no sentinel byte in it;
3. masks whose bool bytes are not 0/1 select like numpy (nonzero is true), on both executors.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lazyfuel as lf
from lazyfuel.backends.cpu.executor import CpuExecutor
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.planner.program import Program, Step
from lazyfuel.providers import available_backends

from .fuzzing import fuzz

# the guard helpers of the Vulkan tests (that folder is no package: pytest puts it on sys.path)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends" / "vulkan"))
from vulkan_helpers import GUARD, PAD, padded
from vulkan_helpers import run_kernel as guarded_run

SENTINEL = 0xEE  # around host slices (executor level)
POISON = 0xA5  # inside outputs before a kernel writes them
NO_BAD = 0xFFFFFFFF
DTYPES = [DType.U8, DType.BOOL, DType.F16, DType.BF16, DType.U32, DType.F32, DType.F64]
NEAR = [2**31 - 1, 2**31, 2**32 - 2, 2**32 - 1, 2**32 - 5, 2**16, 2**24 + 1]


def _vulkan():
    try:
        available_backends("vulkan")
    except RuntimeError as err:
        pytest.skip(str(err))
    from lazyfuel.backends.vulkan import get_pool, register
    from lazyfuel.backends.vulkan.executor import VulkanExecutor

    register()
    return get_pool(), VulkanExecutor()


@pytest.fixture(scope="module")
def device():
    """(pool, VulkanExecutor) on the process's pool; validation messages fail the test."""
    return _vulkan()


@pytest.fixture(autouse=True)
def no_validation_messages(request):
    if "device" not in request.fixturenames:
        yield
        return
    pool, _ = request.getfixturevalue("device")
    pool.validation_messages.clear()
    yield
    messages = list(pool.validation_messages)
    pool.validation_messages.clear()
    assert not messages, "validation layer reported:\n" + "\n".join(messages[:10])


def binding(op: str, dtype: DType, backend: str):
    """The registry's binding of `op` for data `dtype` on `backend` (U32 indices or a BOOL mask)."""
    second = "BOOL" if op == "MaskedFill" else "U32"
    return lf.registry().lookup(op, [dtype, second, dtype], backend=backend)


def clean_bytes(rng: np.random.Generator, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    """Data whose bytes are below 0x50: never GUARD, SENTINEL or POISON (BOOL: 0/1)."""
    n = math.prod(shape)
    if dtype is DType.BOOL:
        return rng.integers(0, 2, shape).astype(np.bool_)
    return rng.integers(0, 0x50, n * dtype.itemsize, dtype=np.uint8).view(dtype.numpy).reshape(shape)


def select_step(op: str, dtype: DType, backend: str, shape: tuple[int, ...], dim: int,
                idx_shape: tuple[int, ...], args: tuple[int, int]) -> Step:
    if op == "IndexSelect":
        n = idx_shape[0]
        params = (("outer_count", math.prod(shape[:dim])), ("source_dim_size", shape[dim]), ("n_indices", n),
                  ("inner_count", math.prod(shape[dim + 1:])))
        out = (*shape[:dim], n, *shape[dim + 1:])
    else:
        params = (("source_shape", shape), ("output_shape", idx_shape), ("dim", dim))
        out = idx_shape
    return Step(binding(op, dtype, backend), args, params, out, dtype)


def reference(op: str, src: np.ndarray, dim: int, idx: np.ndarray) -> np.ndarray:
    """numpy's result where each index is good (bad ones clipped: those elements are not compared)."""
    safe = np.minimum(idx.astype(np.int64), src.shape[dim] - 1)
    return np.take(src, safe, axis=dim) if op == "IndexSelect" else np.take_along_axis(src, safe, axis=dim)


def bad_elements(op: str, shape: tuple[int, ...], dim: int, idx: np.ndarray) -> np.ndarray:
    """A bool array of the output's shape: True where the element comes from a bad index."""
    bad = idx.astype(np.int64) >= shape[dim]
    if op == "Gather":
        return bad
    view = [1] * len(shape)
    view[dim] = bad.size
    out_shape = (*shape[:dim], bad.size, *shape[dim + 1:])
    return np.broadcast_to(bad.reshape(view), out_shape)


@st.composite
def select_cases(draw: st.DrawFn):
    op = draw(st.sampled_from(["IndexSelect", "Gather"]))
    dtype = draw(st.sampled_from(DTYPES))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    dim = draw(st.integers(0, len(shape) - 1))
    if op == "IndexSelect":
        idx_shape = (draw(st.integers(1, 9)),)
    else:
        idx_shape = tuple(draw(st.integers(1, 5)) if a == dim else n for a, n in enumerate(shape))
    length, total = shape[dim], math.prod(shape)
    near = [length - 1, length, length + 1, total - 1, total, total + 1, *NEAR]
    good = st.integers(0, length - 1)
    negative_as_u32 = st.integers(-(2**63), -1).map(lambda v: v % 2**32)  # np.array([v]).astype(np.uint32)
    values = draw(st.lists(st.one_of(good, good, st.sampled_from(near), negative_as_u32),
                           min_size=math.prod(idx_shape), max_size=math.prod(idx_shape)))
    idx = np.array(values, np.uint32).reshape(idx_shape)
    return op, dtype, shape, dim, idx, draw(st.integers(0, 2**32 - 1))


def _first_bad_position(idx: np.ndarray, length: int) -> int:
    bad = np.flatnonzero(idx.reshape(-1).astype(np.int64) >= length)
    return int(bad[0]) if bad.size else NO_BAD


# -- 1. kernel level ------------------------------------------------------------------------------
@fuzz(60)
@given(select_cases(), st.booleans(), st.booleans())
def test_kernels_never_read_outside_the_source_nor_write_for_a_bad_index(device, case, ssbo, coalesced):
    pool, _ = device
    if not pool.allocator.direct:
        pytest.skip("guard tests read device memory directly; this device needs staging")
    op, dtype, shape, dim, idx, seed = case
    src = clean_bytes(np.random.default_rng(seed), dtype, shape)
    step = select_step(op, dtype, "Vulkan", shape, dim, idx.shape, (0, 1))
    out_nbytes = math.prod(step.out_shape) * dtype.itemsize
    saved = pool.ssbo, pool.coalesced
    pool.ssbo, pool.coalesced = ssbo and pool.push_descriptor_fn is not None, coalesced
    try:
        region, status = guarded_run(pool, step, [src, idx], out_nbytes, POISON)
    finally:
        pool.ssbo, pool.coalesced = saved
    assert status == _first_bad_position(idx, shape[dim])
    end = PAD + padded(out_nbytes)
    assert (region[:PAD] == GUARD).all() and (region[end:] == GUARD).all(), "a guard byte changed"
    out = region[PAD:PAD + out_nbytes]
    assert not (out == GUARD).any(), "the output holds a byte from outside the source"
    w = dtype.itemsize
    got = out.reshape(-1, w)
    bad = bad_elements(op, shape, dim, idx).reshape(-1)
    assert (got[bad] == POISON).all(), "an element of a bad index was written"
    expected = np.ascontiguousarray(reference(op, src, dim, idx)).reshape(-1).view(np.uint8).reshape(-1, w)
    np.testing.assert_array_equal(got[~bad], expected[~bad])


# -- 2. executor level ----------------------------------------------------------------------------
def in_sentinel_slice(a: np.ndarray, before: int, after: int) -> tuple[np.ndarray, np.ndarray]:
    """(host buffer full of SENTINEL, a view of it holding a copy of `a` at a 16-aligned offset)."""
    nbytes = a.nbytes
    host = np.full(before + nbytes + after + 64, SENTINEL, np.uint8)
    start = before + (-(host.ctypes.data + before) % 16)
    view = host[start:start + nbytes].view(a.dtype).reshape(a.shape)
    view[...] = a
    return host, view


def program(steps: list[Step], inputs: list[np.ndarray], output: int) -> Program:
    return Program(tuple(DType.from_numpy(a.dtype) for a in inputs), tuple(Layout.of(a) for a in inputs),
                   tuple(steps), (output,))


MODES = ["Vulkan, zero-copy import", "Vulkan, copied", "Cpu"]


def executor_for(mode: str, request) -> tuple[str, object]:
    """(backend, run function) for `mode`. With 'zero-copy import' every input, however small, is
    bound to the kernels over its own host pages (where the sentinel surrounds it); 'copied'
    uploads it into device memory."""
    if mode == "Cpu":
        return "Cpu", CpuExecutor().run
    pool, executor = request.getfixturevalue("device")
    if mode.endswith("import"):
        if pool.allocator.imports is None:
            pytest.skip("this device cannot import host memory")
        saved = pool.allocator.import_min
        pool.allocator.import_min = 1
        request.addfinalizer(lambda: setattr(pool.allocator, "import_min", saved))
    return "Vulkan", executor.run


@fuzz(40)
@given(data=st.data())
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("through", ["host indices", "indices computed on the device"])
def test_executors_raise_for_bad_indices_and_return_no_sentinel(request, mode, through, data):
    backend, run = executor_for(mode, request)
    op, dtype, shape, dim, idx, seed = data.draw(select_cases())
    src = clean_bytes(np.random.default_rng(seed), dtype, shape)
    _host, src_view = in_sentinel_slice(src, before=48, after=48)
    if through == "host indices":
        inputs = [src_view, idx]
        steps = [select_step(op, dtype, backend, shape, dim, idx.shape, (0, 1))]
    else:  # idx = table[pick]: the table holds the indices scrambled; only the device sees idx
        perm = np.random.default_rng(seed).permutation(idx.shape[0]).astype(np.uint32)
        table = np.empty_like(idx)
        table[perm] = idx
        inputs = [src_view, table, perm]
        pick = Step(binding("IndexSelect", DType.U32, backend), (1, 2),
                    (("outer_count", 1), ("source_dim_size", idx.shape[0]), ("n_indices", idx.shape[0]),
                     ("inner_count", math.prod(idx.shape[1:]))), idx.shape, DType.U32)
        steps = [pick, select_step(op, dtype, backend, shape, dim, idx.shape, (0, 3))]
    first = _first_bad_position(idx, shape[dim])
    if first == NO_BAD:
        (got,) = run(program(steps, inputs, len(inputs) + len(steps) - 1), inputs)
        expected = reference(op, src, dim, idx)
        np.testing.assert_array_equal(got.view(np.uint8), np.ascontiguousarray(expected).view(np.uint8))
        assert not (got.reshape(-1).view(np.uint8) == SENTINEL).any()
        return
    value = int(idx.reshape(-1)[first])
    where = first if idx.ndim == 1 else tuple(int(i) for i in np.unravel_index(first, idx.shape))
    with pytest.raises(IndexError, match=rf"index {value} at position {re.escape(str(where))}"):
        run(program(steps, inputs, len(inputs) + len(steps) - 1), inputs)


@pytest.mark.parametrize("mode", MODES)
def test_after_a_bad_index_the_executor_still_gives_exact_results(request, mode):
    backend, run = executor_for(mode, request)
    src = np.arange(64, dtype=np.uint8).reshape(16, 4)
    step = select_step("IndexSelect", DType.U8, backend, src.shape, 0, (3,), (0, 1))
    for bad in (16, 2**32 - 1, int(np.array([-1]).astype(np.uint32)[0])):
        inputs = [src, np.array([0, bad, 1], np.uint32)]
        with pytest.raises(IndexError, match=rf"index {bad} at position 1"):
            run(program([step], inputs, 2), inputs)
    good = np.array([15, 0, 15], np.uint32)
    (got,) = run(program([step], [src, good], 2), [src, good])
    np.testing.assert_array_equal(got, src[[15, 0, 15]])


# -- 3. masks -------------------------------------------------------------------------------------
@fuzz(40)
@given(st.sampled_from(DTYPES), st.lists(st.integers(1, 6), min_size=1, max_size=3).map(tuple),
       st.integers(0, 2**32 - 1))
@pytest.mark.parametrize("mode", MODES)
def test_masks_with_any_bytes_select_like_numpy(request, mode, dtype, shape, seed):
    """A BOOL mask made with `.view(bool)` may hold any byte; the kernels treat nonzero as true."""
    backend, run = executor_for(mode, request)
    rng = np.random.default_rng(seed)
    data = clean_bytes(rng, dtype, shape)
    raw = rng.integers(0, 256, shape, dtype=np.uint8) * rng.integers(0, 2, shape, dtype=np.uint8)
    _host, mask = in_sentinel_slice(raw.view(np.bool_), before=32, after=32)
    fill = np.asarray(1, dtype.numpy).tobytes()
    step = Step(binding("MaskedFill", dtype, backend), (0, 1), (("fill_bytes", fill),), shape, dtype)
    (got,) = run(program([step], [data, mask], 2), [data, mask])
    expected = np.where(raw != 0, np.asarray(1, dtype.numpy), data)
    np.testing.assert_array_equal(got.view(np.uint8), expected.view(np.uint8))

