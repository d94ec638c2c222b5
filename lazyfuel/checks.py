"""Checks of user input shared by every layer: indices, masks, fill values and shapes.

The index and mask checks are here; the fill value's are in `lazyfuel.fill_checks` and the shapes'
in `lazyfuel.shape_checks`, both importable from here too.

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

import numbers
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from lazyfuel.dtypes import native
from lazyfuel.fill_checks import fill_bytes  # noqa: F401 (re-exported)
from lazyfuel.shape_checks import (  # noqa: F401 (re-exported)
    broadcast_mask_shape,
    check_gather_shapes,
    masked_fill_shape,
)

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
