"""Adversarial indices and masks through the public API, on every backend, with numpy, dask and
lazyfuel index inputs.

The API (README, "Quickstart"): indices of any integer dtype become U32 after a range check; a negative
value, a value >= the axis length or >= 2**32 is an IndexError naming the value and its position
(concrete indices when the op is built, lazy ones when they are computed); float, bool, complex
and non-integer object indices are a TypeError naming the dtype; a mask must be bool (a uint8 mask
is a TypeError that says to pass a bool mask), a mask that does not broadcast is a ValueError
naming both shapes. A hypothesis test draws index values near every bound, of every integer
dtype, and checks the result against numpy or the error against the first bad value in row-major
order (lazy indices are checked block by block as they compute, so the error names *a* bad value
and its true position, not necessarily the first). Nothing wrong or partial is ever returned.
"""

from __future__ import annotations

import ast
import re

import dask.array as da
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lazyfuel as lf

from .fuzzing import fuzz

AXIS = 10
X = np.arange(AXIS * 4, dtype=np.float32).reshape(AXIS, 4)
INPUTS = ("numpy", "dask", "lazyfuel", "list")


def as_input(idx: np.ndarray, kind: str):
    """`idx` as the kind of index input a user passes (lazy kinds chunked by 2 along every axis)."""
    if kind == "dask":
        return da.from_array(idx, chunks=2)
    if kind == "lazyfuel":
        return lf.from_array(idx, chunks=2)
    if kind == "list":
        return idx.tolist()
    return idx


def run(op: str, idx, x: np.ndarray = X, dim: int = 0) -> np.ndarray:
    """Build and compute the op (errors of lazy indices surface at compute)."""
    return getattr(lf, op)(x, dim, idx).compute()


def _first_bad(idx: np.ndarray, length: int) -> tuple[int, tuple[int, ...] | int]:
    values = idx.astype(object).reshape(-1)
    flat = next(i for i, v in enumerate(values) if not 0 <= v < length)
    where = np.unravel_index(flat, idx.shape) if idx.ndim > 1 else flat
    return int(values[flat]), (tuple(int(i) for i in where) if idx.ndim > 1 else where)


def _position_text(where) -> str:
    return re.escape(f"at position {where}")


BAD_VALUES = {
    "the axis length": np.array([0, 3, AXIS, 1], np.int64),
    "one past, int32": np.array([AXIS + 1], np.int32),
    "2**32 - 1": np.array([5, 2**32 - 1], np.uint32),
    "2**32": np.array([1, 2, 2**32], np.int64),
    "2**63 - 1": np.array([2**63 - 1], np.int64),
    "uint64 2**64 - 1": np.array([0, 2**64 - 1], np.uint64),
    "negative int64": np.array([0, 1, -1], np.int64),
    "most negative int64": np.array([-(2**63)], np.int64),
    "negative int8": np.array([3, -128], np.int8),
    "negative int64 cast to uint32": np.array([2, -1]).astype(np.uint32),
    "-AXIS cast to uint32": np.array([-AXIS]).astype(np.uint32),
}


@pytest.mark.parametrize("kind", INPUTS)
@pytest.mark.parametrize("case", sorted(BAD_VALUES))
def test_index_select_out_of_range_names_value_and_position(backend, case, kind):
    idx = BAD_VALUES[case]
    value, where = _first_bad(idx, AXIS)
    words = "is negative" if value < 0 else "is out of range"
    with pytest.raises(IndexError, match=rf"index {value} {_position_text(where)} {words}"):
        run("index_select", as_input(idx, kind))


@pytest.mark.parametrize("kind", INPUTS)
@pytest.mark.parametrize("case", sorted(BAD_VALUES))
def test_gather_out_of_range_names_value_and_2d_position(backend, case, kind):
    idx = np.zeros(X.shape, np.int64)
    bad = BAD_VALUES[case]
    idx = idx.astype(bad.dtype) if bad.dtype != np.uint32 else idx.astype(np.uint32)
    idx.reshape(-1)[7: 7 + bad.size] = bad  # row 1, from column 3 on
    value, where = _first_bad(idx, AXIS)
    with pytest.raises(IndexError, match=rf"index {value} {_position_text(where)}"):
        run("gather", as_input(idx, kind))


@pytest.mark.parametrize("kind", ("numpy", "dask", "lazyfuel"))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.bool_, np.complex64, np.complex128,
                                   "U2", "S2", object, "datetime64[s]"])
@pytest.mark.parametrize("op", ["index_select", "gather"])
def test_non_integer_indices_are_a_type_error_naming_the_dtype(op, dtype, kind):
    idx = np.zeros((AXIS, 4) if op == "gather" else (3,), np.int64).astype(dtype)
    if dtype is object:
        idx[...] = 1.5  # objects that are not ints (Python ints in an object array are accepted)
    if kind == "lazyfuel":
        try:
            made = lf.from_array(idx)
        except TypeError as err:  # a dtype lazyfuel arrays do not hold at all
            assert "unsupported numpy dtype" in str(err)
            return
    else:
        made = as_input(idx, kind)
    with pytest.raises(TypeError, match=rf"got dtype {re.escape(str(np.asarray(idx).dtype))}"):
        getattr(lf, op)(X, 0, made)  # refused when built, even when lazy


def test_python_ints_beyond_int64_are_checked_not_wrapped():
    with pytest.raises(IndexError, match=r"index 18446744073709551616 at position 1"):
        lf.index_select(X, 0, [1, 2**64])
    with pytest.raises(IndexError, match=r"index -18446744073709551616 at position 0 is negative"):
        lf.index_select(X, 0, [-(2**64)])


@pytest.mark.parametrize("shape", [(2, 2), (1, 3, 1), ()])
def test_index_select_wrong_rank(shape):
    idx = np.zeros(shape, np.int64)
    if shape == ():  # 0-d: one index, as in PyTorch
        assert run("index_select", idx).shape == (1, 4)
        return
    with pytest.raises(ValueError, match=rf"1-d indices, got shape {re.escape(str(shape))}"):
        lf.index_select(X, 0, idx)
    with pytest.raises(ValueError, match="1-d indices"):
        lf.index_select(X, 0, da.from_array(idx))


@pytest.mark.parametrize("shape", [(AXIS,), (AXIS, 4, 1), (3, 5), (3, 3)])
def test_gather_wrong_rank_or_shape(shape):
    with pytest.raises(ValueError, match=rf"gather index has (\d dims|shape {re.escape(str(shape))})"):
        lf.gather(X, 1, np.zeros(shape, np.int64))


MASK_DTYPES = {np.uint8: "pass mask.astype\\(bool\\)", np.int8: "got int8", np.int64: "got int64",
               np.uint32: "got uint32", np.float32: "got float32", np.float16: "got float16",
               object: "got object", np.complex64: "got complex64"}


@pytest.mark.parametrize("kind", ("numpy", "dask", "lazyfuel"))
@pytest.mark.parametrize("dtype", list(MASK_DTYPES), ids=lambda d: np.dtype(d).name)
def test_masks_that_are_not_bool_are_refused(dtype, kind):
    mask = (np.arange(X.size).reshape(X.shape) % 3 == 0).astype(dtype)
    if kind == "lazyfuel" and np.dtype(dtype) == np.dtype(object):
        with pytest.raises(TypeError, match="unsupported numpy dtype"):
            lf.from_array(mask)
        return
    made = {"numpy": mask, "dask": da.from_array(mask, chunks=2), "lazyfuel": None}[kind]
    if made is None:
        made = lf.from_array(mask, chunks=2)
    with pytest.raises(TypeError, match=rf"mask must be bool.*{MASK_DTYPES[dtype]}"):
        lf.masked_fill(X, made, 0.0)


@pytest.mark.parametrize("kind", ("numpy", "dask", "lazyfuel"))
@pytest.mark.parametrize("shape", [(AXIS, 3), (3,), (AXIS, 4, 1), (2, AXIS + 1, 4), (0,), (AXIS + 1, 1)])
def test_masks_of_the_wrong_shape_name_both_shapes(shape, kind):
    """Shapes that do not broadcast with the data's (10, 4); a larger one that does, such as
    (2, 10, 4), stretches the data up instead (tests/graph/test_lower.py)."""
    mask = np.ones(shape, bool)
    made = {"numpy": mask, "dask": da.from_array(mask), "lazyfuel": lf.from_array(mask)}[kind]
    expected = (rf"mask of shape {re.escape(str(shape))} and data of shape \(10, 4\) do not broadcast "
                rf"together")
    with pytest.raises(ValueError, match=expected):
        lf.masked_fill(X, made, 0.0)


def test_bool_masks_whose_bytes_are_not_0_or_1_mean_true(backend):
    """A bool array made by `.view(bool)` can hold any byte; nonzero is true, as numpy reads it."""
    raw = np.arange(X.size, dtype=np.uint8).reshape(X.shape) * 37  # 0, 37, 74, … wrapping
    mask = raw.view(np.bool_)
    got = lf.masked_fill(X, mask, -1.0).compute()
    np.testing.assert_array_equal(got, np.where(raw != 0, np.float32(-1.0), X))


# -- hypothesis: values near every bound, every integer dtype, every input kind --------------------
INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
NEAR = [0, 1, AXIS - 1, AXIS, AXIS + 1, 2**7 - 1, 2**8 - 1, 2**15, 2**31 - 1, 2**31, 2**32 - 2, 2**32 - 1,
        2**32, 2**32 + AXIS - 1, 2**63 - 1, -1, -2, -AXIS, -(2**31), -(2**63)]


# The source as it is, and as views of a larger array (transposed, reversed, strided, offset).
_BIG = np.arange(AXIS * 4 * 3, dtype=np.float32).reshape(4 * 3, AXIS)
SOURCES = [X, _BIG[:4].T, _BIG[::3].T[::-1], _BIG[1::3, :].T]


@st.composite
def adversarial_indices(draw: st.DrawFn, shape: tuple[int, ...]) -> np.ndarray:
    dtype = np.dtype(draw(st.sampled_from(INT_DTYPES)))
    n = int(np.prod(shape))
    good = st.integers(0, AXIS - 1)
    values = draw(st.lists(st.one_of(good, good, good, st.sampled_from(NEAR)), min_size=n, max_size=n))
    # numpy's own cast: negative values and values beyond the dtype wrap, as a user's astype would
    if dtype.kind == "u":
        return np.array([v % 2**64 for v in values], np.uint64).astype(dtype).reshape(shape)
    return np.array(values, np.int64).astype(dtype).reshape(shape)


@fuzz(60)
@given(st.data(), st.sampled_from(INPUTS), st.sampled_from(["index_select", "gather"]))
def test_values_near_the_bounds_give_the_numpy_result_or_the_first_bad_value(backend, data, kind, op):
    shape = (data.draw(st.integers(0, 7)),) if op == "index_select" else (data.draw(st.integers(0, 5)), 4)
    idx = data.draw(adversarial_indices(shape))
    if kind == "lazyfuel" and idx.dtype not in (np.int32, np.int64, np.uint8, np.uint32):
        kind = "numpy"
    if kind == "list" and idx.size == 0:
        kind = "numpy"  # [] has no second axis: a list cannot say "shape (0, 4)"
    arg = as_input(idx, kind)
    x = data.draw(st.sampled_from(SOURCES))  # views reach the strided-reading kernels
    wide = idx.astype(object)
    if all(0 <= v < AXIS for v in wide.reshape(-1)):
        got = run(op, arg, x)
        wide64 = idx.astype(np.int64)
        ref = np.take(x, wide64, axis=0) if op == "index_select" else np.take_along_axis(x, wide64, axis=0)
        np.testing.assert_array_equal(got, ref)
        return
    if kind in ("dask", "lazyfuel"):  # blocks are checked as they compute: any bad one may be named
        with pytest.raises(IndexError) as info:
            run(op, arg, x)
        found = re.search(r"index (-?\d+) at position (\d+|\([\d, ]+\))", str(info.value))
        value, where = int(found[1]), ast.literal_eval(found[2])
        assert wide[where] == value and not 0 <= value < AXIS, str(info.value)
        return
    value, where = _first_bad(idx, AXIS)
    with pytest.raises(IndexError, match=rf"index {value} {_position_text(where)}"):
        run(op, arg, x)
