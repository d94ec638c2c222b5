"""numpy.fft in the CPU provider: the FFT reference functions and the FFT step functions.

- **Reference functions** `fft`, `ifft`, `rfft`, `irfft` (`lazyfuel.ops.fft.reference`) have
  numpy.fft's semantics (`n` crops or zero-pads the transformed axis, `axis` may be negative,
  `norm` is None, "backward", "ortho" or "forward"). They compute in double precision and
  return the dtype the contracts promise for the input's precision: complex of it for
  fft/ifft/rfft (F32 → C64, F64 → C128), real of it for irfft (C64 → F32, C128 → F64). The
  audit compares every FFT binding against them.
- **Step functions** (`*_step`) are the CPU provider's FFT kernels, called by `CpuExecutor` with
  the op params the planner computes (`shape`, `axis`, `length`, `norm`, `log2_length`; see
  `lazyfuel.ops.fft.FftParams`). They compute in the input's own precision (numpy >= 2 keeps
  float32 as float32) and return a fresh C-contiguous array of the promised dtype.

Unlike the select family these kernels do arithmetic: results are exact only up to the precision
the contract declares (`lazyfuel/contracts/cpu.md`, normwise per transformed row).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lazyfuel.ops.fft import KINDS, kind_of, reference
from lazyfuel.ops.fft import out_dtype as _out_dtype


def fft(x: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> np.ndarray:
    """numpy.fft.fft of `x` (F32 F64 C64 C128, any layout) in double precision, as C64 or C128.

    Raises TypeError for another dtype, ValueError for a bad `n` or `norm` (numpy's checks).

    >>> fft(np.array([1.0, 0.0, 0.0, 0.0], np.float32))
    array([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j], dtype=complex64)
    """
    return reference("fft", x, n, axis, norm)


def ifft(x: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> np.ndarray:
    """numpy.fft.ifft of `x` (F32 F64 C64 C128) in double precision, as C64 or C128 (see `fft`)."""
    return reference("ifft", x, n, axis, norm)


def rfft(x: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> np.ndarray:
    """numpy.fft.rfft of real `x` (F32 F64) in double precision, as C64 or C128; the axis becomes
    n//2 + 1 long. Raises TypeError for complex or other input.

    >>> rfft(np.array([1.0, 2.0, 3.0]))
    array([ 6. +0.j       , -1.5+0.8660254j])
    """
    return reference("rfft", x, n, axis, norm)


def irfft(x: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> np.ndarray:
    """numpy.fft.irfft of complex `x` (C64 C128) in double precision, as F32 or F64; the axis
    becomes `n` long (default 2 * (m - 1)). Raises TypeError for real or other input."""
    return reference("irfft", x, n, axis, norm)


def _step(name: str, source: np.ndarray, axis: int, length: int, norm: str) -> np.ndarray:
    out = _out_dtype(name, source.dtype)
    result = KINDS[kind_of(name.capitalize())].numpy(source, n=length, axis=axis, norm=norm)
    return np.ascontiguousarray(result.astype(out, copy=False))


def fft_step(source: np.ndarray, *, shape: Any, axis: int, length: int, norm: str,
             log2_length: int = 0) -> np.ndarray:
    """Fft along `axis` of `source` (F32 F64 C64 C128, any layout, of `shape`), `length` points
    (cropped or zero-padded, numpy's `n`), normalized as `norm`; a fresh C64 / C128 array."""
    return _step("fft", source, axis, length, norm)


def ifft_step(source: np.ndarray, *, shape: Any, axis: int, length: int, norm: str,
              log2_length: int = 0) -> np.ndarray:
    """Ifft along `axis`, as `fft_step`."""
    return _step("ifft", source, axis, length, norm)


def rfft_step(source: np.ndarray, *, shape: Any, axis: int, length: int, norm: str,
              log2_length: int = 0) -> np.ndarray:
    """Rfft along `axis` of real `source` (F32 F64): `length` points in, length//2 + 1 out (C64 / C128)."""
    return _step("rfft", source, axis, length, norm)


def irfft_step(source: np.ndarray, *, shape: Any, axis: int, length: int, norm: str,
               log2_length: int = 0) -> np.ndarray:
    """Irfft along `axis` of complex `source` (C64 C128): length//2 + 1 points in, `length` real
    points out (F32 / F64)."""
    return _step("irfft", source, axis, length, norm)


__all__ = ["fft", "fft_step", "ifft", "ifft_step", "irfft", "irfft_step", "rfft", "rfft_step"]
