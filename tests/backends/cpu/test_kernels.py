"""numpy reference kernels: documented examples, generated cases against plain numpy, bit exactness."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyfuel.backends.cpu.kernels import (
    contiguize,
    contiguize_step,
    gather,
    gather_step,
    index_select,
    index_select_step,
    masked_fill,
    masked_fill_step,
)
from lazyfuel.checks import fill_bytes
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout, memory_span

INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]

# Bit patterns that arithmetic would change: signalling NaN with payload, quiet NaN with payload,
# -0.0, smallest subnormal, -inf.
SPECIALS = {
    2: [0x7C01, 0xFE42, 0x8000, 0x0001, 0xFC00],
    4: [0x7FA00001, 0xFFC12345, 0x80000000, 0x00000001, 0xFF800000],
    8: [0x7FF4000000000001, 0xFFF8DEADBEEF0001, 0x8000000000000000, 1, 0xFFF0000000000000],
}


def same_bits(got: np.ndarray, expected: np.ndarray) -> None:
    """Equal dtype, shape and bytes (so NaN payloads and -0.0 count), and `got` is contiguous."""
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    assert got.flags.c_contiguous
    assert np.ascontiguousarray(got).view(np.uint8).tobytes() == \
        np.ascontiguousarray(expected).view(np.uint8).tobytes()


def random_array(rng: np.random.Generator, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    """Random bits of `dtype` (BOOL: 0/1), with special float patterns sprinkled in."""
    n = int(np.prod(shape))
    if dtype is DType.BOOL:
        return rng.integers(0, 2, shape).astype(np.bool_)
    raw = rng.integers(0, 256, n * dtype.itemsize, dtype=np.uint8)
    a = raw.view(dtype.numpy).reshape(shape)
    if dtype.numpy.kind in "fV" and n:
        words = a.reshape(-1).view(f"u{dtype.itemsize}")
        specials = SPECIALS[dtype.itemsize]
        picks = rng.integers(0, n, min(n, len(specials)))
        words[picks] = np.array(specials[: len(picks)], words.dtype)
    return a


KINDS = ("contig", "step2", "reverse", "offset", "broadcast")


@st.composite
def arrays(draw, dtypes=tuple(DType), min_dims=1, max_dims=4, min_side=0, max_side=4):
    """A view of random bits: any dtype, rank 1–4, each axis contiguous, stepped, reversed,
    offset or broadcast, axes stored in a random order (a transposed view)."""
    dtype = draw(st.sampled_from(dtypes))
    rank = draw(st.integers(min_dims, max_dims))
    shape = tuple(draw(st.lists(st.integers(min_side, max_side), min_size=rank, max_size=rank)))
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=rank, max_size=rank))
    perm = draw(st.permutations(range(rank)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    base_shape = [{"contig": n, "step2": 2 * n, "reverse": n, "offset": n + 1, "broadcast": 1}[k]
                  for n, k in zip(shape, kinds)]
    stored = random_array(rng, dtype, tuple(base_shape[p] for p in perm))
    view = stored.transpose(np.argsort(perm))
    slices = {"contig": slice(None), "step2": slice(None, None, 2), "reverse": slice(None, None, -1),
              "offset": slice(1, None), "broadcast": slice(None)}
    view = view[tuple(slices[k] for k in kinds)]
    return np.broadcast_to(view, shape)


def index_arrays(rng: np.random.Generator, shape: tuple[int, ...], axis_len: int, dtype) -> np.ndarray:
    return rng.integers(0, max(axis_len, 1), shape).astype(dtype) if axis_len else np.zeros(shape, dtype)


# --- documented examples ----------------------------------------------------------------------


def test_gather_pytorch_doc_example():
    out = gather(np.array([[1, 2], [3, 4]], np.int64), 1, np.array([[0, 0], [1, 0]]))
    np.testing.assert_array_equal(out, [[1, 1], [4, 3]])


def test_index_select_pytorch_doc_example():
    x = np.array([[0.1427, 0.0231, -0.5414, -1.0009],
                  [-0.4664, 0.2647, -0.1228, -1.1068],
                  [-1.1734, -0.6571, 0.7230, -0.6004]], np.float32)
    indices = np.array([0, 2])
    np.testing.assert_array_equal(index_select(x, 0, indices), x[[0, 2]])
    np.testing.assert_array_equal(index_select(x, 1, indices), x[:, [0, 2]])


def test_masked_fill_example():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    mask = np.array([True, False, True])  # broadcast along rows
    np.testing.assert_array_equal(masked_fill(x, mask, -1), [[-1, 1, -1], [-1, 4, -1]])


def test_gather_dim0_by_hand():
    x = np.array([[1, 2, 3], [4, 5, 6]], np.uint8)
    np.testing.assert_array_equal(gather(x, 0, [[1, 0, 1]]), [[4, 2, 6]])
    np.testing.assert_array_equal(gather(x, -2, [[1, 0, 1]]), [[4, 2, 6]])


# --- generated cases against plain numpy, bit for bit -----------------------------------------


@settings(max_examples=300, deadline=None)
@given(arrays(), st.data())
def test_index_select_matches_np_take(x, data):
    dim = data.draw(st.integers(-x.ndim, x.ndim - 1))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    n = data.draw(st.integers(0, 6)) if x.shape[dim] else 0
    idx = index_arrays(rng, (n,), x.shape[dim], data.draw(st.sampled_from(INT_DTYPES)))
    same_bits(index_select(x, dim, idx), np.take(x, idx, axis=dim))


@settings(max_examples=300, deadline=None)
@given(arrays(), st.data())
def test_gather_matches_np_take_along_axis(x, data):
    dim = data.draw(st.integers(-x.ndim, x.ndim - 1))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    idx_shape = list(x.shape)
    idx_shape[dim] = data.draw(st.integers(0, 5)) if x.shape[dim] else 0
    idx = index_arrays(rng, tuple(idx_shape), x.shape[dim], data.draw(st.sampled_from(INT_DTYPES)))
    same_bits(gather(x, dim, idx), np.take_along_axis(x, idx.astype(np.intp), axis=dim))


@settings(max_examples=300, deadline=None)
@given(arrays(), st.data())
def test_masked_fill_matches_np_where(x, data):
    mask_rank = data.draw(st.integers(0, x.ndim))
    mask_shape = tuple(data.draw(st.sampled_from([1, n])) for n in x.shape[x.ndim - mask_rank:])
    if data.draw(st.booleans()):  # a mask larger than x: the result has the common shape
        mask_shape = (data.draw(st.integers(1, 3)), *(3 if n == 1 else n for n in x.shape))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    mask = rng.integers(0, 2, mask_shape).astype(bool)
    held = {"b": [0, 1, True, -0.0], "i": [0, 1, True, 7, -0.0], "u": [0, 1, True, 7, -0.0]}  # exactly
    value = data.draw(st.sampled_from(held.get(x.dtype.kind, [0, 1, True, 7, 2.5, -0.0])))
    fill = np.frombuffer(fill_bytes(value, DType.from_numpy(x.dtype)), x.dtype)[0]
    same_bits(masked_fill(x, mask, value), np.where(mask, fill, x))


@settings(max_examples=200, deadline=None)
@given(arrays(min_dims=0))
def test_contiguize_matches_ascontiguousarray(x):
    out = contiguize(x)
    same_bits(out, np.array(x, order="C"))
    assert out.flags.owndata or not np.shares_memory(out, x)


# --- 0-d inputs (PyTorch: one element along dim 0) --------------------------------------------


def test_zero_d_inputs():
    x = np.array(5.0, np.float32)
    same_bits(index_select(x, 0, [0]), x)
    same_bits(index_select(x, -1, np.array(0)), x)
    same_bits(gather(x, 0, np.array(0)), x)
    same_bits(gather(x, 0, [0, 0]), np.array([5.0, 5.0], np.float32))
    same_bits(masked_fill(x, np.array(True), 1), np.array(1.0, np.float32))
    same_bits(contiguize(x), x)
    with pytest.raises(ValueError, match="index_select on a 0-d array takes exactly one index, got 2"):
        index_select(x, 0, [0, 0])
    with pytest.raises(IndexError, match="index 1 at position 0 is out of range; expected 0 <= index < 1"):
        gather(x, 0, [1])


def test_zero_d_index_for_index_select_keeps_the_dim():
    x = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(index_select(x, 1, np.int64(2)), [[2], [5]])


# --- bit exactness of specials ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [DType.F16, DType.BF16, DType.F32, DType.F64, DType.C64, DType.C128])
def test_specials_survive_every_op(dtype):
    words = SPECIALS[min(dtype.itemsize, 8)]
    raw = np.array(words, f"u{min(dtype.itemsize, 8)}")
    x = raw.view(dtype.numpy) if dtype.itemsize <= 8 else np.repeat(raw, 2).view(dtype.numpy)
    n = x.shape[0]
    same_bits(index_select(x, 0, np.arange(n)[::-1]), x[::-1])
    same_bits(gather(x, 0, np.arange(n)), x)
    same_bits(masked_fill(x, np.zeros(n, bool), 0), x)
    same_bits(contiguize(x[::-1]), x[::-1].copy())


def test_masked_fill_nan_payload_fill_value():
    payload = np.array([0x7FA00001], np.uint32).view(np.float32)
    out = masked_fill(np.zeros(3, np.float32), np.array([True, False, True]), payload[0])
    assert out.view(np.uint32).tolist() == [0x7FA00001, 0, 0x7FA00001]


# --- errors -------------------------------------------------------------------------------------


def test_index_error_names_value_and_position():
    x = np.zeros((2, 3))
    with pytest.raises(IndexError, match=r"index 3 at position 1 is out of range; expected 0 <= index < 3"):
        index_select(x, 1, [0, 3])
    with pytest.raises(IndexError, match=r"index -1 at position \(0, 1\) is negative.*no wrap-around"):
        gather(x, 1, [[0, -1], [0, 0]])


def test_uint8_mask_is_refused():
    with pytest.raises(TypeError, match=r"mask must be bool \(got uint8\).*mask\.astype\(bool\)"):
        masked_fill(np.zeros(3), np.array([1, 0, 1], np.uint8), 1.0)


def test_shape_errors():
    with pytest.raises(ValueError, match=r"mask of shape \(2,\) and data of shape \(3,\) do not broadcast"):
        masked_fill(np.zeros(3), np.array([True, False]), 1.0)
    with pytest.raises(ValueError, match=r"gather index has shape \(3, 3\), expected \(2, any\)"):
        gather(np.zeros((2, 3)), 1, np.zeros((3, 3), np.int64))
    with pytest.raises(ValueError, match=r"index_select takes 1-d indices, got shape \(1, 2\)"):
        index_select(np.zeros((2, 3)), 0, [[0, 1]])


def test_dim_out_of_range():
    with pytest.raises(IndexError, match=r"dim -3 is out of range for an array of 2 dims"):
        index_select(np.zeros((2, 3)), -3, [0])


def test_float_indices_are_refused():
    with pytest.raises(TypeError, match=r"index values must be integers \(got dtype float64\)"):
        index_select(np.zeros(3), 0, [0.0])


def test_unsupported_dtype_is_refused():
    with pytest.raises(TypeError, match=r"unsupported numpy dtype timedelta64\[s\]; lazyfuel handles"):
        contiguize(np.zeros(3, "m8[s]"))


def test_results_never_alias_inputs():
    x = np.arange(6, dtype=np.int32)
    for out in (index_select(x, 0, np.arange(6)), gather(x, 0, np.arange(6)),
                masked_fill(x, np.zeros(6, bool), 0), contiguize(x)):
        assert not np.shares_memory(out, x)


# --- step functions (the provider's kernels, with the op params of docs/internals.md) ------------


def poisoned(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A C-contiguous array of 0xA5 bytes: an element a kernel does not write shows up."""
    return np.full(int(np.prod(shape)) * dtype.itemsize, 0xA5, np.uint8).view(dtype).reshape(shape)


def select_params(shape: tuple[int, ...], dim: int, n: int) -> dict[str, int]:
    return {"outer_count": int(np.prod(shape[:dim])), "source_dim_size": shape[dim], "n_indices": n,
            "inner_count": int(np.prod(shape[dim + 1:]))}


@settings(max_examples=200, deadline=None)
@given(arrays(), st.data())
def test_index_select_step_matches_np_take(x, data):
    dim = data.draw(st.integers(0, x.ndim - 1))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    n = data.draw(st.integers(0, 6)) if x.shape[dim] else 0
    idx = index_arrays(rng, (n,), x.shape[dim], np.uint32)
    out = index_select_step(x, idx, **select_params(x.shape, dim, n))
    expected = np.take(x, idx, axis=dim)
    same_bits(out, expected.reshape(out.shape))
    assert out.shape == (int(np.prod(x.shape[:dim])), n, int(np.prod(x.shape[dim + 1:])))
    dest = poisoned(expected.shape, x.dtype)
    assert index_select_step(x, idx, **select_params(x.shape, dim, n), out=dest) is dest
    same_bits(dest, expected)


@settings(max_examples=200, deadline=None)
@given(arrays(), st.data())
def test_gather_step_matches_np_take_along_axis(x, data):
    dim = data.draw(st.integers(0, x.ndim - 1))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    out_shape = list(x.shape)
    out_shape[dim] = data.draw(st.integers(0, 5)) if x.shape[dim] else 0
    idx = index_arrays(rng, tuple(out_shape), x.shape[dim], np.uint32)
    out = gather_step(x, idx, source_shape=x.shape, output_shape=tuple(out_shape), dim=dim)
    expected = np.take_along_axis(x, idx.astype(np.intp), axis=dim)
    same_bits(out, expected)
    dest = poisoned(expected.shape, x.dtype)
    assert gather_step(x, idx, source_shape=x.shape, output_shape=tuple(out_shape), dim=dim, out=dest) is dest
    same_bits(dest, expected)


@settings(max_examples=200, deadline=None)
@given(arrays(), st.data())
def test_masked_fill_step_matches_np_where(x, data):
    """Every dtype and layout, masks of the data's shape or broadcasting to it; fresh and out=."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    keep = [data.draw(st.booleans()) for _ in range(x.ndim)]
    mask = rng.integers(0, 2, tuple(n if k else 1 for n, k in zip(x.shape, keep))).astype(bool)
    fill_word = rng.integers(0, 256, x.dtype.itemsize, dtype=np.uint8).tobytes()
    fill = np.frombuffer(fill_word, x.dtype).reshape(())
    expected = np.where(mask, fill, x)
    same_bits(masked_fill_step(x, mask, fill_bytes=fill_word), expected)
    dest = poisoned(x.shape, x.dtype)
    assert masked_fill_step(x, mask, fill_bytes=fill_word, out=dest) is dest
    same_bits(dest, expected)


@settings(max_examples=200, deadline=None)
@given(arrays(min_dims=0))
def test_contiguize_step_from_array_and_from_raw_span(x):
    layout = Layout.of(x)
    params = {"shape": layout.shape, "strides": layout.strides, "offset": layout.offset}
    same_bits(contiguize_step(x, **params), np.array(x, order="C"))
    span = memory_span(x)
    same_bits(contiguize_step(span, **params, dtype=DType.from_numpy(x.dtype)), np.array(x, order="C"))


def test_masked_fill_step_mask_forms():
    data = np.arange(6, dtype=np.float64).reshape(2, 3)[:, ::-1]
    fill = fill_bytes(-1, DType.F64)
    expected = np.array([[-1, 1, -1], [-1, 4, -1]], np.float64)
    row = np.array([True, False, True])
    same_bits(masked_fill_step(data, np.broadcast_to(row, (2, 3)), fill_bytes=fill), expected)
    same_bits(masked_fill_step(data, row, fill_bytes=fill), expected)  # broadcasts
    same_bits(masked_fill_step(data, np.tile(row, 2), fill_bytes=fill), expected)  # same size, flat


def test_masked_fill_step_errors():
    data = np.zeros(3, np.float32)
    with pytest.raises(ValueError, match=r"fill_bytes has 8 bytes, expected 4 for float32"):
        masked_fill_step(data, np.ones(3, bool), fill_bytes=fill_bytes(1, DType.F64))
    with pytest.raises(TypeError, match=r"mask must be bool \(got uint8\)"):
        masked_fill_step(data, np.ones(3, np.uint8), fill_bytes=fill_bytes(1, DType.F32))
    with pytest.raises(ValueError, match=r"mask of shape \(2,\) does not broadcast"):
        masked_fill_step(data, np.ones(2, bool), fill_bytes=fill_bytes(1, DType.F32))


def test_step_functions_bounds_check_indices():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with pytest.raises(IndexError, match=r"index 3 at position 1 is out of range; expected 0 <= index < 3"):
        index_select_step(x, np.array([0, 3], np.uint32), **select_params(x.shape, 1, 2))
    with pytest.raises(IndexError, match=r"index 2 at position \(1, 0\) is out of range; "
                                         r"expected 0 <= index < 2"):
        gather_step(x, np.array([[0, 0, 0], [2, 0, 0]], np.uint32), source_shape=(2, 3),
                    output_shape=(2, 3), dim=0)


def test_step_functions_check_params_against_arrays():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match=r"source has 6 elements \(shape \(2, 3\)\), expected "
                                         r"outer_count \* source_dim_size \* inner_count = 2 \* 4 \* 1 = 8"):
        index_select_step(x, np.zeros(1, np.uint32), outer_count=2, source_dim_size=4, n_indices=1,
                          inner_count=1)
    with pytest.raises(ValueError, match=r"indices has 2 elements .* expected n_indices = 1"):
        index_select_step(x, np.zeros(2, np.uint32), **select_params(x.shape, 0, 1))
    with pytest.raises(ValueError, match=r"indices has 3 elements .*prod\(output_shape \(2, 2\)\) = 4"):
        gather_step(x, np.zeros(3, np.uint32), source_shape=(2, 3), output_shape=(2, 2), dim=1)


def test_contiguize_step_never_reads_outside_the_span():
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(ValueError, match=r"reaches elements 2\.\.5, outside the span of 4 elements"):
        contiguize_step(x, shape=(4,), strides=(1,), offset=2)
    with pytest.raises(ValueError, match=r"reaches elements -3\.\.0"):
        contiguize_step(x, shape=(4,), strides=(-1,), offset=0)
    with pytest.raises(ValueError, match=r"shape \(4,\) has 1 dims but strides \(1, 1\) has 2"):
        contiguize_step(x, shape=(4,), strides=(1, 1), offset=0)
    with pytest.raises(TypeError, match=r"a raw memory span must be a 1-d uint8 array, got float32"):
        contiguize_step(x, shape=(4,), strides=(1,), offset=0, dtype="F32")


def test_contiguize_step_views_of_a_span():
    x = np.arange(6, dtype=np.int64)
    same_bits(contiguize_step(x, shape=(2, 3), strides=(0, -2), offset=5),
              np.array([[5, 3, 1], [5, 3, 1]], np.int64))
    same_bits(contiguize_step(x, shape=(0, 3), strides=(7, 7), offset=99), np.zeros((0, 3), np.int64))
