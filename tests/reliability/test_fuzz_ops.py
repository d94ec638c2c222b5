"""Fuzzing the op front ends (`lf.index_select`, `gather`, `masked_fill`, slicing, `transpose`,
`broadcast_to`, the FFT family) with random and bad arguments.

Each example builds one op from a random data array (any lazyfuel dtype and some it refuses, 0-d
to 3-d, empty axes) and random arguments (wrong dims, dims out of range, non-arrays, strings,
None, object and float arrays, wrong shapes, 0-d, huge ints). The promise:
- the op either builds, or raises IndexError, TypeError or ValueError (lazyfuel's ContractError
  and NoBindingError are ValueError / LookupError) *when it is built*, with a message that says
  what was wrong, never Python's own wording from deep inside ("'NoneType' object is not
  iterable", "unsupported operand", "has no attribute" …) and never another exception type;
- what builds computes (on the Cpu backend, fast) to exactly what numpy gives for the same
  operation; where numpy refuses an argument lazyfuel built, that is a failure too. The one
  documented difference: lazyfuel refuses negative indices numpy would wrap (PyTorch's rule).
"""

from __future__ import annotations

import math
import re
import warnings

import dask.array as da
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lazyfuel as lf

from .fuzzing import fuzz

DOCUMENTED = (IndexError, TypeError, ValueError, lf.NoBindingError)
# Python's own messages: seeing one means an argument reached code that never checked it.
INTERNAL = re.compile(
    r"object is not (iterable|subscriptable|callable)|unsupported operand|has no attribute|"
    r"object of type .* has no len|takes \d+ positional|unhashable type|cannot unpack|"
    r"not supported between instances|must be real number, not|invalid literal for int\(\)|"
    r"only integer scalar arrays|list indices must be|'\w+' object cannot be interpreted")

GOOD_DTYPES = [np.float32, np.float16, np.float64, np.uint8, np.uint32, np.bool_, np.int32, np.int64,
               np.complex64, np.int8, np.int16, np.uint16, np.uint64]


@st.composite
def data_arrays(draw: st.DrawFn) -> np.ndarray:
    shape = tuple(draw(st.lists(st.integers(0, 4), max_size=3)))
    dtype = draw(st.sampled_from(GOOD_DTYPES))
    size = math.prod(shape)
    values = np.arange(1, size + 1) % 7
    return values.astype(dtype).reshape(shape)


JUNK = [None, "abc", "", b"x", 3.5, float("nan"), True, object(), {}, {"a": 1}, [], [[1, 2], [3]], (1, "a"),
        np.array("x"), np.array([1, 2], dtype=np.int16), np.array([1.5]), np.array([object()]), 1j, slice(1),
        Ellipsis, 2**64, -(2**63) - 1, np.int8(-1), np.uint64(2**64 - 1)]


def integers_near(bound: int) -> st.SearchStrategy[int]:
    return st.one_of(st.integers(-bound - 2, bound + 2), st.sampled_from([2**31, 2**32 - 1, 2**32, 2**63 - 1,
                                                                          -(2**63), 2**64]))


def index_arrays(length: int, rank: int) -> st.SearchStrategy:
    dtypes = st.sampled_from([np.int64, np.int32, np.int8, np.uint8, np.uint32, np.uint64, np.int16,
                              np.float32, np.float64, np.bool_, np.complex64, object])
    shapes = st.lists(st.integers(0, 4), min_size=max(rank - 1, 0), max_size=rank + 1).map(tuple)

    @st.composite
    def build(draw: st.DrawFn):
        shape, dtype = draw(shapes), draw(dtypes)
        values = draw(st.lists(integers_near(length), min_size=math.prod(shape), max_size=math.prod(shape)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                a = np.array(values, dtype=object).astype(dtype).reshape(shape)
            except (OverflowError, ValueError, TypeError):
                a = np.array([v % (length or 1) for v in values], dtype=np.int64).reshape(shape)
        return a

    return st.one_of(build(), st.sampled_from(JUNK), st.lists(integers_near(length), max_size=4))


def dims() -> st.SearchStrategy:
    return st.one_of(st.integers(-5, 5), st.sampled_from([2**63 - 1, -(2**63), np.int64(1), np.uint8(0), 1.0,
                                                         True, None, "0", [0], (0,)]))


def _check_error(err: BaseException) -> None:
    assert isinstance(err, DOCUMENTED), f"undocumented {type(err).__name__}: {err}"
    message = str(err)
    assert message, f"{type(err).__name__} without a message"
    assert not INTERNAL.search(message), f"Python's own wording escaped: {type(err).__name__}: {message}"


def _expect(build, reference, lazy_inputs: bool = False) -> None:
    """Build the op; if it builds, compute it and compare with numpy's `reference()`."""
    try:
        arr = build()
    except BaseException as err:
        _check_error(err)
        return
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            expected = reference()
    except Exception as err:
        pytest.fail(f"lazyfuel built an op numpy refuses ({type(err).__name__}: {err})")
    got = arr.compute(scheduler="sync")
    assert got.shape == np.shape(expected) and got.dtype == np.asarray(expected).dtype, (got, expected)
    np.testing.assert_array_equal(got, expected)


@pytest.fixture(autouse=True)
def cpu_backend(monkeypatch):
    monkeypatch.setenv("LAZYFUEL_BACKEND", "cpu")


def _index_array(idx) -> np.ndarray:
    """`idx` as numpy reads it, but an empty list is empty integer indices (documented)."""
    return np.empty(0, np.int64) if isinstance(idx, list) and not idx else np.asarray(idx)


def _no_negatives(idx) -> None:
    """lazyfuel refuses what numpy would wrap: a reference for an accepted build never has negatives."""
    a = np.asarray(idx)
    if a.dtype.kind in "iO" and a.size and (a < 0).any():
        raise IndexError("negative")


@fuzz(150)
@given(data_arrays(), dims(), st.data())
def test_index_select(x, dim, data):
    length = x.shape[dim] if isinstance(dim, int) and -x.ndim <= dim < x.ndim else 3
    idx = data.draw(index_arrays(length, 1))

    def reference():
        _no_negatives(idx)
        a = _index_array(idx)
        if a.dtype.kind not in "iuO" or a.ndim > 1 or isinstance(dim, bool) or np.asarray(dim).ndim:
            raise TypeError("numpy-equivalent refusal")
        flat = np.atleast_1d(a).astype(np.int64)
        if x.ndim == 0:
            return np.take(x.reshape(1), flat, axis=0).reshape(()) if flat.size == 1 else 1 / 0
        return np.take(x, flat, axis=dim)

    _expect(lambda: lf.index_select(x, dim, idx), reference)


@fuzz(150)
@given(data_arrays(), dims(), st.data())
def test_gather(x, dim, data):
    length = x.shape[dim] if isinstance(dim, int) and -x.ndim <= dim < x.ndim else 3
    idx = data.draw(st.one_of(index_arrays(length, x.ndim),
                              st.just(np.zeros(x.shape, np.int64)),
                              st.just(np.full(x.shape, length, np.int64))))

    def reference():
        _no_negatives(idx)
        a = _index_array(idx)
        if a.dtype.kind not in "iuO" or isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
            raise TypeError("numpy-equivalent refusal")
        # a 0-d source or index counts as one element along dim 0 (PyTorch)
        src, ix = x.reshape(x.shape or (1,)), a.reshape(a.shape or (1,))
        d = dim % max(src.ndim, 1)
        if src.ndim != ix.ndim or any(s != i for k, (s, i) in enumerate(zip(src.shape, ix.shape)) if k != d):
            raise ValueError("shape")
        out = np.take_along_axis(src, ix.astype(np.int64), axis=d)
        return out.reshape(a.shape)

    _expect(lambda: lf.gather(x, dim, idx), reference)


MASKS = st.sampled_from([np.bool_, np.uint8, np.int8, np.int64, np.float32, np.float64, object, np.complex64])


@fuzz(150)
@given(data_arrays(), st.data())
def test_masked_fill(x, data):
    kind = data.draw(st.sampled_from(["same", "broadcast", "random shape", "junk"]))
    if kind == "junk":
        mask = data.draw(st.sampled_from(JUNK))
    else:
        shape = {"same": x.shape, "broadcast": x.shape[data.draw(st.integers(0, x.ndim)):],
                 "random shape": tuple(data.draw(st.lists(st.integers(0, 4), max_size=4)))}[kind]
        if kind == "broadcast":
            shape = tuple(1 if data.draw(st.booleans()) else n for n in shape)
        bits = np.arange(math.prod(shape)).reshape(shape) % 3 == 0
        mask = bits.astype(data.draw(MASKS))
    value = data.draw(st.one_of(st.integers(-300, 300), st.floats(), st.sampled_from(
        [True, 1j, 2**70, -1, "1", None, np.float32(2), np.array(3), np.array([1, 2]), b"\x01"])))

    def reference():
        m = np.asarray(mask) if not (isinstance(mask, list) and not mask) else np.empty(0, bool)  # documented
        if m.dtype != np.bool_:
            raise TypeError("mask")
        if isinstance(value, (str, bytes)) or value is None or np.ndim(value):
            raise TypeError("value")
        fill = np.asarray(value)
        if x.dtype.kind != "c" and np.iscomplexobj(fill) and np.imag(fill) != 0:
            raise ValueError("complex into a real dtype")
        if x.dtype.kind in "iub":  # the value must be held exactly: nothing truncated or wrapped
            real = float(np.real(fill).astype(object))
            low, high = (0, 1) if x.dtype.kind == "b" else (np.iinfo(x.dtype).min, np.iinfo(x.dtype).max)
            if not math.isfinite(real) or not real.is_integer() or not low <= int(real) <= high:
                raise ValueError("not held exactly")
            fill = np.asarray(int(real))
        elif x.dtype.kind == "f" and math.isfinite(float(np.real(fill).astype(object))) and not np.isfinite(
                np.real(fill).astype(object).astype(np.float64).astype(x.dtype)):
            raise ValueError("overflow")
        np.broadcast_shapes(m.shape, x.shape)  # a larger mask stretches the data up (np.where)
        cast = np.real(fill) if x.dtype.kind != "c" else fill
        return np.where(m, cast.astype(x.dtype), x)

    _expect(lambda: lf.masked_fill(x, mask, value), reference)


KEYS = st.one_of(
    st.integers(-6, 6), st.none(), st.just(Ellipsis), st.floats(-3, 3), st.booleans(), st.just("a"),
    st.builds(slice, st.one_of(st.none(), st.integers(-6, 6)), st.one_of(st.none(), st.integers(-6, 6)),
              st.one_of(st.none(), st.integers(-3, 3), st.just(1.5))),
    st.just([0, 1]), st.just(np.array([0])), st.just(np.int64(1)), st.just(2**64))


@fuzz(150)
@given(data_arrays(), st.one_of(KEYS, st.lists(KEYS, max_size=4).map(tuple)))
def test_basic_slicing(x, key):
    def reference():
        parts = key if isinstance(key, tuple) else (key,)
        if any(p is None or isinstance(p, (bool, list, np.ndarray, float, str)) for p in parts):
            raise TypeError("advanced or None")
        return x[key]

    _expect(lambda: lf.from_array(x)[key], reference)


AXES = st.one_of(st.none(), st.lists(st.one_of(st.integers(-4, 4), st.just("0"), st.just(1.0), st.none()),
                                     max_size=4).map(tuple), st.integers(-2, 2), st.just("01"))


@fuzz(100)
@given(data_arrays(), AXES)
def test_transpose(x, axes):
    def reference():
        if isinstance(axes, str) or (isinstance(axes, tuple) and any(not isinstance(a, int) for a in axes)):
            raise TypeError("axes")
        return np.transpose(x, axes)

    _expect(lambda: lf.transpose(x, axes), reference)


SHAPES = st.one_of(st.lists(st.integers(-2, 5), max_size=4).map(tuple), st.integers(-2, 5),
                   st.sampled_from([None, "3", (2.5,), ("a",), (2**64,), [None], (True,)]))


@fuzz(100)
@given(data_arrays(), SHAPES)
def test_broadcast_to(x, shape):
    def reference():
        parts = shape if isinstance(shape, tuple) else (shape,)
        if any(not isinstance(p, int) or isinstance(p, bool) for p in parts):
            raise TypeError("shape")
        return np.broadcast_to(x, shape)

    _expect(lambda: lf.broadcast_to(x, shape), reference)


TRANSFORMS = {"fft": np.fft.fft, "ifft": np.fft.ifft, "rfft": np.fft.rfft, "irfft": np.fft.irfft}


@fuzz(100)
@given(data_arrays(), st.sampled_from(sorted(TRANSFORMS)),
       st.one_of(st.integers(-4, 4), st.sampled_from([None, 1.0, "0", True, 2**64])),
       st.one_of(st.none(), st.integers(-2, 9), st.sampled_from([0.5, "4", True, 2**64])),
       st.sampled_from([None, "ortho", "forward", "backward", "bogus", 1, ""]))
def test_fft_family(x, name, axis, n, norm):
    try:
        arr = getattr(lf, name)(x, axis=axis, n=n, norm=norm)
    except BaseException as err:
        _check_error(err)
        return
    assert not isinstance(axis, bool) and not isinstance(n, bool)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = TRANSFORMS[name](x, n=n, axis=axis, norm=norm)
    got = arr.compute(scheduler="sync")
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-2, atol=1e-2 * max(1.0, float(np.abs(expected).max(
        initial=0))))


@fuzz(100)
@given(st.one_of(st.sampled_from(JUNK), st.lists(st.integers(), max_size=3)),
       st.sampled_from(["index_select", "gather", "masked_fill", "transpose", "broadcast_to", "fft",
                        "contiguous", "from_array"]))
def test_non_array_data(x, op):
    """The data argument itself is not an array lazyfuel handles."""
    calls = {"index_select": lambda: lf.index_select(x, 0, [0]), "gather": lambda: lf.gather(x, 0, [0]),
             "masked_fill": lambda: lf.masked_fill(x, True, 0), "transpose": lambda: lf.transpose(x),
             "broadcast_to": lambda: lf.broadcast_to(x, (2, 2)), "fft": lambda: lf.fft(x),
             "contiguous": lambda: lf.contiguous(x), "from_array": lambda: lf.from_array(x)}
    try:
        arr = calls[op]()
    except BaseException as err:
        _check_error(err)
        return
    arr.compute(scheduler="sync")  # what builds, runs


@fuzz(100)
@given(st.sampled_from([np.float32, np.float64, np.bool_, np.complex64, object, "U3"]),
       st.lists(st.integers(0, 3), min_size=1, max_size=2).map(tuple),
       st.sampled_from(["index_select", "gather"]))
def test_lazy_indices_of_a_wrong_dtype_are_refused_when_built(dtype, shape, op):
    """A dask index array is not computed at build time, but its dtype is checked there."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = da.from_array(np.zeros(shape, dtype=dtype) if dtype not in (object, "U3")
                        else np.full(shape, "0", dtype=dtype), chunks=2)
    with pytest.raises((TypeError, ValueError)) as info:
        lf.index_select(x, 0, idx) if op == "index_select" else lf.gather(x, 0, idx)
    _check_error(info.value)
