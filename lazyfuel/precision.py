"""Comparing a kernel's output with the reference within a contract's declared precision.

`first_mismatch(got, expected, precision)` returns the first element (row-major) that breaks the
contract, or None. With `max_ulp`, `max_relative` and `max_absolute` all 0 the bits must be equal
(NaN payloads, -0.0 and subnormals included). Otherwise a float element passes when its bits are
equal, or both are NaN, or the difference is within any one of the three tolerances (ULPs counted
on the dtype's own grid; complex numbers component by component). Integers and bools are always
compared bit for bit. `first_bit_difference` is the determinism check: equal bits, nothing else.

`worst_row_mismatch(got, expected, axis, precision)` is the normwise check of transforms (decision
8: an FFT's error near a zero bin is not bounded element by element): over each row along `axis`,
`max|got - expected| <= max_relative * max|expected|` (or `<= max_absolute`), computed in double
precision; it reports the worst offending row and its worst element.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lazyfuel.contracts.model import Precision
from lazyfuel.dtypes import DType

_COMPONENT = {DType.C64: DType.F32, DType.C128: DType.F64}
_FLOATS = (DType.F16, DType.BF16, DType.F32, DType.F64)


@dataclass(frozen=True)
class Mismatch:
    """One offending element: its index, both values and both bit patterns (hex, big-endian)."""

    index: tuple[int, ...]
    got: str
    expected: str
    got_bits: str
    expected_bits: str
    why: str

    def __str__(self) -> str:
        return (f"element {self.index}: got {self.got} ({self.got_bits}), expected {self.expected} "
                f"({self.expected_bits}); {self.why}")


def exact(precision: Precision) -> bool:
    """Whether the contract declares a byte-exact result."""
    return precision.max_ulp == 0 and precision.max_relative == 0 and precision.max_absolute == 0


def _words(a: np.ndarray) -> np.ndarray:
    """Each element's bytes as one row (any itemsize, complex and bf16 included)."""
    flat = np.ascontiguousarray(a).reshape(-1)
    return flat.view(np.uint8).reshape(flat.size, a.dtype.itemsize)


def _bit_differences(got: np.ndarray, expected: np.ndarray) -> np.ndarray:
    return np.flatnonzero((_words(got) != _words(expected)).any(axis=1))


def describe(got: np.ndarray, expected: np.ndarray, flat: int, why: str) -> Mismatch:
    """The Mismatch at row-major position `flat` of two same-shape arrays."""
    index = tuple(int(i) for i in np.unravel_index(flat, got.shape)) if got.ndim else ()
    g, e = _words(got)[flat], _words(expected)[flat]
    return Mismatch(index, repr(got.reshape(-1)[flat].item()), repr(expected.reshape(-1)[flat].item()),
                    "0x" + g[::-1].tobytes().hex(), "0x" + e[::-1].tobytes().hex(), why)


def first_bit_difference(got: np.ndarray, expected: np.ndarray, why: str) -> Mismatch | None:
    """The first element whose bits differ (shapes must match), or None."""
    bad = _bit_differences(got, expected)
    return describe(got, expected, int(bad[0]), why) if bad.size else None


def _ordered(bits: np.ndarray, width: int) -> np.ndarray:
    """Sign-magnitude float bits mapped to integers in value order (as float64, for distances)."""
    sign = np.uint64(1) << np.uint64(width * 8 - 1)
    b = bits.astype(np.uint64)
    magnitude = (b & ~sign).astype(np.float64)
    return np.where((b & sign) != 0, -magnitude, magnitude)


def _component_ok(got: np.ndarray, expected: np.ndarray, precision: Precision) -> np.ndarray:
    """Per element of two real float arrays: within tolerance (see the module docstring)."""
    width = got.dtype.itemsize
    gb, eb = got.view(f"u{width}"), expected.view(f"u{width}")
    with np.errstate(invalid="ignore", over="ignore"):  # a signalling NaN may complain when cast
        g, e = got.astype(np.float64), expected.astype(np.float64)
        same = gb == eb
        both_nan = np.isnan(g) & np.isnan(e)
        finite = np.isfinite(g) & np.isfinite(e)
        diff = np.abs(g - e)
        ulps = np.abs(_ordered(gb, width) - _ordered(eb, width))
        near = finite & ((ulps <= precision.max_ulp) | (diff <= precision.max_absolute)
                         | (diff <= precision.max_relative * np.abs(e)))
    return same | both_nan | near


def first_mismatch(got: np.ndarray, expected: np.ndarray, dtype: DType,
                   precision: Precision) -> Mismatch | None:
    """The first element of `got` outside `precision` of `expected`, or None; see the module doc.

    Raises ValueError if the shapes or dtypes differ (the result is wrong as a whole).
    """
    if got.shape != expected.shape or got.dtype != expected.dtype:
        raise ValueError(f"result is {got.dtype} {got.shape}, expected {expected.dtype} {expected.shape}")
    component = _COMPONENT.get(dtype, dtype)
    if exact(precision) or component not in _FLOATS:
        return first_bit_difference(got, expected, "bits differ (the contract declares exact results)"
                                    if exact(precision) else "bits differ (integers are exact)")
    g = np.ascontiguousarray(got).reshape(-1).view(component.numpy)
    e = np.ascontiguousarray(expected).reshape(-1).view(component.numpy)
    ok = _component_ok(g, e, precision)
    if dtype in _COMPONENT:
        ok = ok.reshape(-1, 2).all(axis=1)
    bad = np.flatnonzero(~ok)
    if not bad.size:
        return None
    why = (f"outside max_ulp {precision.max_ulp:g}, max_relative {precision.max_relative:g}, "
           f"max_absolute {precision.max_absolute:g}")
    return describe(got, expected, int(bad[0]), why)


def _row_label(index: tuple[int, ...], axis: int) -> str:
    """`(3, :)`: the row along `axis` through element `index`."""
    parts = [":" if i == axis else str(v) for i, v in enumerate(index)]
    return "(" + ", ".join(parts) + (",)" if len(parts) == 1 else ")")


def worst_row_mismatch(got: np.ndarray, expected: np.ndarray, axis: int,
                       precision: Precision) -> Mismatch | None:
    """The worst element of the worst row along `axis` that breaks the normwise bound, or None.

    A row passes when `max|got - expected| <= max_relative * max|expected|` over it, or
    `<= max_absolute`; differences are taken in double precision (complex: the modulus), and a NaN
    or infinity in `got` where `expected` is finite always fails. Raises ValueError if the shapes
    or dtypes differ (the result is wrong as a whole).
    """
    if got.shape != expected.shape or got.dtype != expected.dtype:
        raise ValueError(f"result is {got.dtype} {got.shape}, expected {expected.dtype} {expected.shape}")
    if got.size == 0:
        return None
    wide = np.complex128 if got.dtype.kind == "c" else np.float64
    g, e = got.astype(wide), expected.astype(wide)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(g - e)
        diff = np.where(np.isnan(diff), np.inf, diff)  # a NaN is as wrong as it gets
        row_diff = diff.max(axis=axis, keepdims=True)
        row_scale = np.abs(e).max(axis=axis, keepdims=True)
        ok = (row_diff <= precision.max_relative * row_scale) | (row_diff <= precision.max_absolute)
        ratio = np.where(row_scale > 0, row_diff / np.where(row_scale > 0, row_scale, 1.0), np.inf)
    if ok.all():
        return None
    row = np.unravel_index(int(np.argmax(np.where(ok, -1.0, ratio))), ratio.shape)
    along = tuple(slice(None) if i == axis else slice(r, r + 1) for i, r in enumerate(row))
    index = tuple(int(np.argmax(diff[along])) if i == axis else int(r) for i, r in enumerate(row))
    flat = int(np.ravel_multi_index(index, got.shape))
    d, scale = float(row_diff[row]), float(row_scale[row])
    why = (f"row {_row_label(index, axis)} along axis {axis}: max|got - expected| = {d:.3g} is "
           f"{d / scale if scale > 0 else float('inf'):.3g} x max|expected| ({scale:.3g}), beyond "
           f"max_relative {precision.max_relative:g} (normwise per row) and max_absolute "
           f"{precision.max_absolute:g}")
    return describe(got, expected, flat, why)
