"""Checks of a fill value: `fill_bytes`, the value as the bytes of one element of the data's dtype,
or a TypeError (no number) or ValueError (a value the dtype cannot hold exactly).
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

import ml_dtypes
import numpy as np

from lazyfuel.dtypes import DType


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
