"""Checks of user input shared by every layer: indices, masks, fill values and shapes.

Each check either returns the input in the one form kernels accept (U32 indices, a bool mask, the
fill value's bytes, a normalised dim) or raises with a message that says what was wrong, where, and
what would be accepted:

- `IndexError`: an index value out of range (negative, or >= the axis length; for `as_indices`,
  which makes U32, also >= 2**32);
- `TypeError`: a wrong dtype (float or bool indices, a uint8 mask, a fill value that is no number),
  or a numpy masked array (its mask would be lost: `refuse_masked`);
- `ValueError`: shapes that do not fit together, or a fill value the dtype cannot hold exactly.

Nothing here is lazy: the checks run on concrete numpy data (lazy indices are checked when they
are computed). They are vectorised, so checking a million indices costs a couple of reductions.
"""

from __future__ import annotations

import math
import numbers
import os
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import ml_dtypes
import numpy as np

from lazyfuel.dtypes import DType, native
from lazyfuel.layout import normalize_dim

U32_LIMIT = 2**32
SLAB = 1 << 17  # index elements reduced at a time (1 MiB of int64: stays in a core's cache)
PARALLEL_INDICES = 1 << 20  # index arrays from this many elements are scanned on several threads


def as_indices(indices: Any, axis_len: int, *, what: str = "index") -> np.ndarray:
    """`indices` as a contiguous uint32 array after checking every value against `axis_len`.

    Accepts numpy arrays, array-likes and Python ints of any integer dtype (signed or unsigned,
    any width); the shape is kept (0-d stays 0-d). Empty indices are fine; an empty Python list
    (which numpy reads as float64) counts as empty integer indices. The result may share memory
    with `indices` when that is already a contiguous uint32 array.

    Raises:
        TypeError: the dtype is not an integer one (float, bool, complex, object, string).
        IndexError: some value is negative (no wrap-around, as in PyTorch), >= `axis_len`, or
            >= 2**32; the message names the first such value in row-major order and its position.

    >>> as_indices([2, 0], 3)
    array([2, 0], dtype=uint32)
    >>> as_indices([0, -1], 3)
    Traceback (most recent call last):
    ...
    IndexError: index -1 at position 1 is negative; expected 0 <= index < 3 (no wrap-around, as in PyTorch)
    """
    a = checked_indices(indices, axis_len, what=what, limit=min(int(axis_len), U32_LIMIT))
    return np.asarray(a, dtype=np.uint32, order="C")  # (ascontiguousarray makes 0-d 1-d)


def checked_indices(indices: Any, axis_len: int, *, what: str = "index",
                    origin: Sequence[int] = (), limit: int | None = None) -> np.ndarray:
    """`indices` checked against `axis_len` (and `limit`, when given: `as_indices` passes 2**32),
    returned in their own integer dtype (no copy of an integer ndarray): what a numpy kernel takes
    as it is. Raises as `as_indices`; `origin` is where `indices` start in a larger index array
    (a block of lazy indices), so the message names the position in the whole array."""
    a = integer_indices(indices, axis_len, what=what)
    limit = int(axis_len) if limit is None else limit
    if a.size:
        if a.dtype.kind == "i" and limit <= 2 ** (8 * a.dtype.itemsize - 1):
            # one pass: seen unsigned, a negative value is >= 2**(bits-1) >= limit
            bad = a.view(a.dtype.str.replace("i", "u")).max() >= limit
        else:
            bad = (a.min() < 0 if a.dtype.kind == "i" else False) or a.max() >= limit
        if bad:
            _raise_first_bad(a, int(axis_len), what, origin, limit)
    return a


def refuse_masked(obj: Any, what: str) -> None:
    """TypeError if `obj` is a numpy masked array (or a dask array of them): lazyfuel computes on
    the values alone, so its mask would be lost without a word. `what` names the argument
    (data, indices, mask); the message says how to pass the values explicitly."""
    meta = getattr(obj, "_meta", None) if not isinstance(obj, np.ndarray) else None
    if isinstance(obj, np.ma.MaskedArray) or isinstance(meta, np.ma.MaskedArray):
        raise TypeError(f"{what} is a numpy masked array; lazyfuel does not carry masks, so its mask "
                        f"would be lost: pass {what}.filled(value) to replace the masked elements by "
                        f"a value, or {what}.data to take the values under the mask as they are")


def integer_indices(indices: Any, axis_len: int, *, what: str = "index") -> np.ndarray:
    """`indices` as a numpy array of an integer dtype, shape kept, values not yet range-checked.

    What `as_indices` accepts, before its range check: an empty Python list counts as empty
    integer indices, and Python ints that numpy would hold as float64 or objects (beyond int64)
    are checked here one by one and made int64 (a valid one fits). Shares memory with `indices`
    when that is an integer ndarray in native byte order (one in another, `>i8`, is converted to
    native once).

    Raises:
        TypeError: the dtype is not an integer one.
        IndexError: a Python int beyond int64 is out of range (as `as_indices` words it).
    """
    refuse_masked(indices, "indices")
    a = np.asarray(indices)
    if a.size == 0 and not isinstance(indices, np.ndarray):
        a = a.astype(np.uint32)
    if a.dtype.kind == "f" and not isinstance(indices, np.ndarray):
        # Python ints on both sides of 2**63 ([0, 2**64 - 1]) make numpy choose float64: keep them ints.
        exact = np.asarray(indices, dtype=object)
        a = exact if _all_python_ints(exact) else a
    if a.dtype == object and _all_python_ints(a):
        # Python ints (maybe beyond int64, where numpy falls back to object): check them one by one.
        if any(not 0 <= v < int(axis_len) for v in a.flat):
            _raise_first_bad(a, int(axis_len), what)
        a = a.astype(np.int64)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{what} values must be integers (got dtype {a.dtype}); "
                        f"pass an integer array, e.g. indices.astype(np.int64)")
    if not a.dtype.isnative:  # `>i8`: converted once, here, so that nothing later sees it
        a = a.astype(native(a.dtype))
    return a


Range = tuple[int, int] | None  # the smallest and largest value of a region; None when it is empty


def index_ranges(a: np.ndarray, axis_len: int, regions: Sequence[tuple[slice, ...]], *,
                 what: str = "index") -> tuple[Range, ...]:
    """The smallest and largest value of integer indices `a` in each of `regions`, after checking
    every value against `axis_len`, as `as_indices` does, without making a narrowed copy.

    `a` comes from `integer_indices`; `regions` are tuples of slices that together cover it (a 0-d
    `a` is seen as shape (1,)), such as the blocks a select reads its indices in. Each region is
    reduced slab by slab (`SLAB` elements, so its minimum is taken while its maximum's slab is
    still in cache), the regions spread over up to `os.cpu_count()` threads when `a` holds at
    least `PARALLEL_INDICES` elements (numpy releases the GIL in reductions). An empty region
    gives None.

    Raises:
        IndexError: as `as_indices`: the first bad value in row-major order of the whole `a`, and
            its position.
    """
    whole = a.reshape(a.shape or (1,))
    workers = min(len(regions), os.cpu_count() or 1) if a.size >= PARALLEL_INDICES else 1
    if workers > 1:
        with ThreadPoolExecutor(workers, thread_name_prefix="lazyfuel-indices") as pool:
            ranges = tuple(pool.map(lambda r: _range(whole[r]), regions))
    else:
        ranges = tuple(_range(whole[r]) for r in regions)
    limit = int(axis_len)
    if any(r is not None and (r[0] < 0 or r[1] >= limit) for r in ranges):
        _raise_first_bad(a, int(axis_len), what)
    return ranges


def _range(block: np.ndarray) -> Range:
    """(min, max) of `block`, slab by slab along its first axis (flat when it is contiguous)."""
    if block.size == 0:
        return None
    if block.flags.c_contiguous:
        block = block.reshape(-1)
    rows = max(1, SLAB * block.shape[0] // block.size)
    lows, highs = [], []
    for start in range(0, block.shape[0], rows):
        slab = block[start:start + rows]
        highs.append(slab.max())
        lows.append(slab.min())
    return int(min(lows)), int(max(highs))


def int_sequence(value: Any, what: str) -> tuple[int, ...]:
    """`value` (an int or a sequence of ints, numpy's rule) as a tuple of ints; TypeError naming the
    first entry that is no integer (bools, floats and strings are refused, never converted)."""
    one = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
    items = (value,) if one else value
    if isinstance(items, (str, bytes)) or not hasattr(items, "__iter__"):
        raise TypeError(f"{what} must be an int or a sequence of ints, got {type(value).__name__} {value!r}")
    items = tuple(items)
    for item in items:
        if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, np.integer)):
            raise TypeError(f"{what} must hold integers, got {type(item).__name__} {item!r} in {value!r}")
    return tuple(int(n) for n in items)


def _all_python_ints(a: np.ndarray) -> bool:
    return a.size > 0 and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in a.flat)


def _raise_first_bad(a: np.ndarray, axis_len: int, what: str, origin: Sequence[int] = (),
                     limit: int | None = None) -> None:
    """Raise IndexError for the first out-of-range value of `a` (row-major order), naming the
    value as given and its position (counted from `origin`, where `a` starts in a larger array).
    The one source of the index error texts."""
    limit = axis_len if limit is None else limit
    bad = (a >= limit) | (a < 0) if a.dtype.kind in "iO" else a >= limit
    flat = int(np.argmax(bad.ravel()))
    value = int(a.ravel()[flat])
    where = _position(flat, a.shape, tuple(origin))
    if axis_len:
        valid = f"expected 0 <= {what} < {axis_len}"
    else:
        valid = f"the axis has length 0, so no {what} is valid"
    if value < 0:
        raise IndexError(f"{what} {value} {where} is negative; {valid} (no wrap-around, as in PyTorch)")
    if value >= limit and value < axis_len:
        raise IndexError(f"{what} {value} {where} does not fit in 32 bits; "
                         f"U32 indices hold 0 <= {what} < 2**32")
    raise IndexError(f"{what} {value} {where} is out of range; {valid}")


def _position(flat: int, shape: tuple[int, ...], origin: tuple[int, ...] = ()) -> str:
    if len(shape) == 0:
        return "(the 0-d index)"
    local = (flat,) if len(shape) == 1 else tuple(int(i) for i in np.unravel_index(flat, shape))
    at = tuple(o + i for o, i in zip(origin, local)) if origin else local
    return f"at position {at[0]}" if len(at) == 1 else f"at position {at}"


def check_mask(mask: Any) -> np.ndarray:
    """`mask` as a bool numpy array; only the bool dtype is accepted.

    A uint8 (or any other) mask is refused, never reinterpreted: its bytes could hold values
    other than 0 and 1, and `mask.astype(bool)` says what the caller means. An empty Python list
    counts as an empty bool mask. The result shares memory with `mask` when it is an ndarray.

    Raises:
        TypeError: the mask's dtype is not bool; the message says how to convert it.
    """
    refuse_masked(mask, "mask")
    m = np.asarray(mask)
    if m.size == 0 and not isinstance(mask, np.ndarray):
        m = m.astype(np.bool_)
    if m.dtype == np.bool_:
        return m
    if m.dtype == np.uint8:
        raise TypeError("mask must be bool (got uint8); a uint8 mask is not reinterpreted: "
                        "pass mask.astype(bool)")
    raise TypeError(f"mask must be bool (got {m.dtype}); pass a bool array, e.g. mask != 0")


def fill_bytes(value: Any, dtype: DType) -> bytes:
    """The bytes of `value` as an element of `dtype`: what a MaskedFill kernel writes where the mask
    is true.

    Accepts Python and numpy scalars (bool, int, float, complex, bf16) and 0-d arrays. One rule:
    the value goes in only if `dtype` holds it exactly; nothing is truncated, wrapped or dropped.

    - integer dtypes (U8 U16 U32 U64 I8 I16 I32 I64): a whole number in the dtype's range (`2`,
      `2.0`, `True`, `3+0j`); a fraction (1.5), NaN, ±inf or a value out of range is refused;
    - BOOL: True, False, 0 or 1 (and their float and complex twins); any other number is refused;
    - float dtypes (F16 BF16 F32 F64) and complex ones (C64 C128): rounded to nearest, as every
      float is; a finite value too large for the dtype is refused (it would become infinite:
      PyTorch's "cannot be converted without overflow"); NaN and ±inf pass, and a value already
      of the dtype keeps its exact bits (NaN payloads, -0.0);
    - a complex value into a real dtype: only with an imaginary part of exactly 0.

    Raises:
        TypeError: `value` is not a bool, real or complex scalar (a string, None, an n-d array).
        ValueError: `dtype` cannot hold the value; the message names the value, the dtype and
            what it would accept.
    """
    dtype = DType.parse(dtype)
    arr = _scalar_array(value)
    target = dtype.numpy
    if arr.dtype.kind == "c" and target.kind != "c":
        if arr.imag != 0:
            raise ValueError(f"fill value {value!r} is complex but the data is {dtype}, which holds "
                             f"real values only; pass a real value (e.g. value.real)")
        arr = arr.real
    if target.kind in "iub":
        return _whole_fill(arr, value, dtype)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # numpy's overflow / complex warnings: we check ourselves
        try:
            cast = arr.astype(target)
            overflow = _overflowed(arr, cast)
        except OverflowError:  # a Python int beyond float64
            overflow = True
    if overflow:
        info = ml_dtypes.finfo(target)
        raise ValueError(f"fill value {value!r} cannot be converted to {dtype} without overflow; "
                         f"expected a magnitude <= {float(info.max):g}, or ±inf")
    return cast.tobytes()


def _scalar_array(value: Any) -> np.ndarray:
    """`value` as a 0-d array of a numeric or bool dtype; TypeError otherwise."""
    if isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"fill value must be a bool, int, float or complex scalar (Python or numpy), "
                        f"got {type(value).__name__} {value!r}")
    if isinstance(value, numbers.Number) and not isinstance(value, np.generic):
        # Python ints of any size: keep them exact (numpy would make object or overflow).
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            return np.asarray(value, dtype=object)
    arr = np.asarray(value)
    if arr.ndim != 0:
        raise TypeError(f"fill value must be a scalar, got an array of shape {arr.shape}")
    if arr.dtype.kind in "biufc":
        return arr
    try:
        DType.from_numpy(arr.dtype)  # bf16 and other numpy twins of our dtypes
    except TypeError:
        raise TypeError(f"fill value must be a bool, int, float or complex scalar (Python or numpy), "
                        f"got {type(value).__name__} {value!r}") from None
    return arr


def _whole_fill(arr: np.ndarray, value: Any, dtype: DType) -> bytes:
    """The bytes of `value` (a real 0-d `arr`) in integer or bool `dtype`, which must hold it exactly."""
    info = None if dtype is DType.BOOL else np.iinfo(dtype.numpy)
    low, high = (0, 1) if info is None else (int(info.min), int(info.max))
    accepted, fix = (("True, False, 0 or 1", "value != 0") if dtype is DType.BOOL
                     else (f"a whole number {low} <= value <= {high}", "round(value)"))
    raw = arr.item()
    if isinstance(raw, numbers.Integral):  # bool, int, numpy ints (Python ints of any size)
        whole = int(raw)
    else:
        real = float(raw)
        if not math.isfinite(real):
            raise ValueError(f"fill value {value!r} cannot be converted to {dtype}: integers have "
                             f"no NaN or infinity; expected {accepted}")
        if not real.is_integer():
            raise ValueError(f"fill value {value!r} is not a whole number, so {dtype} cannot hold it "
                             f"exactly (nothing is truncated); expected {accepted}, e.g. {fix}")
        whole = int(real)
    if not low <= whole <= high:
        if dtype is DType.BOOL:
            raise ValueError(f"fill value {value!r} is not a truth value, so BOOL cannot hold it "
                             f"exactly; expected {accepted}, e.g. {fix}")
        raise ValueError(f"fill value {value!r} is out of range for {dtype} "
                         f"(expected {low} <= value <= {high})")
    return np.asarray(whole, dtype=dtype.numpy).tobytes()


def _overflowed(source: np.ndarray, cast: np.ndarray) -> bool:
    """True if a finite part (real or imaginary) of `source` became infinite in `cast`."""
    before = complex(source.item()) if source.dtype == object else _as_complex(source)
    after = _as_complex(cast)
    return any(math.isfinite(b) and not math.isfinite(c)
               for b, c in ((before.real, after.real), (before.imag, after.imag)))


def _as_complex(a: np.ndarray) -> complex:
    return complex(a.astype(np.complex128).item())


def broadcast_mask_shape(mask_shape: Sequence[int], data_shape: Sequence[int]) -> tuple[int, ...]:
    """The data's shape, after checking that a mask of `mask_shape` broadcasts to it (numpy rules).

    The broadcast goes one way: the mask is stretched to the data, never the data to the mask.
    This is what a MaskedFill step sees: the API (`masked_fill_shape`) has already stretched the
    data to the common shape where the mask is larger.

    Raises:
        ValueError: naming both shapes and the first dim that does not fit.
    """
    mask_shape, data_shape = tuple(mask_shape), tuple(data_shape)
    if len(mask_shape) > len(data_shape):
        raise ValueError(f"mask of shape {mask_shape} does not broadcast to data of shape {data_shape}: "
                         f"the mask has {len(mask_shape)} dims, the data {len(data_shape)}")
    lead = len(data_shape) - len(mask_shape)
    for i, (m, d) in enumerate(zip(mask_shape, data_shape[lead:])):
        if m not in (1, d):
            raise ValueError(f"mask of shape {mask_shape} does not broadcast to data of shape "
                             f"{data_shape}: mask dim {i} has {m} elements, expected 1 or {d}")
    return data_shape


def masked_fill_shape(mask_shape: Sequence[int], data_shape: Sequence[int]) -> tuple[int, ...]:
    """The shape of `masked_fill(data, mask, v)`: data and mask broadcast together (numpy rules),
    as `np.where(mask, v, data)` and PyTorch's out-of-place `masked_fill` do. A mask larger than
    the data stretches the data up: mask (2, 1) over data (25,) gives (2, 25).

    Raises:
        ValueError: the shapes do not broadcast together, naming both and the first dim (counted
            from the right, as broadcasting aligns them) where they differ and neither is 1.
    """
    mask_shape, data_shape = tuple(mask_shape), tuple(data_shape)
    out = []
    for back in range(1, max(len(mask_shape), len(data_shape)) + 1):
        m = mask_shape[-back] if back <= len(mask_shape) else 1
        d = data_shape[-back] if back <= len(data_shape) else 1
        if m != d and 1 not in (m, d):
            raise ValueError(f"mask of shape {mask_shape} and data of shape {data_shape} do not "
                             f"broadcast together: dim -{back} has {m} elements in the mask and {d} "
                             f"in the data (expected equal extents, or 1 in either)")
        out.append(d if m == 1 else m)
    return tuple(reversed(out))


def check_gather_shapes(source_shape: Sequence[int], index_shape: Sequence[int], dim: int) -> int:
    """The normalised `dim` of a gather, after checking the index shape against the source shape.

    `dim` may be negative. The index must have the source's rank and equal the source's extent on
    every axis but `dim` (PyTorch also allows smaller extents there). A 0-d source or
    index counts as one element along dim 0, as in PyTorch. The output has the index's shape.

    Raises:
        IndexError: `dim` is out of range for the source's rank.
        ValueError: the ranks differ, or an extent differs on an axis other than `dim`.
    """
    source_shape, index_shape = tuple(source_shape), tuple(index_shape)
    d = normalize_dim(dim, len(source_shape))
    src = source_shape or (1,)
    idx = index_shape or (1,)
    if len(src) != len(idx):
        raise ValueError(f"gather index has {len(index_shape)} dims but the source has "
                         f"{len(source_shape)}; expected an index of rank {len(source_shape)} "
                         f"(got shape {index_shape} for source shape {source_shape})")
    for axis, (s, i) in enumerate(zip(src, idx)):
        if axis != d and s != i:
            expected = (*src[:d], "any", *src[d + 1:])
            raise ValueError(f"gather index has shape {index_shape}, expected "
                             f"({', '.join(map(str, expected))}) for source shape {source_shape} "
                             f"and dim {d}: axis {axis} has {i} elements, the source {s}")
    return d
