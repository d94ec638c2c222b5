"""The four transforms the vkfft provider runs, as data: what each reads, writes and asks VkFFT for.

A `Transform` is the `impl` of every KernelRef in the provider's link registry: the executor reads
from it how long the transformed axis is on the way in and out, which dtype VkFFT reads, whether the
transform is real-to-complex (VkFFT's `r2c`) and whether it is the inverse direction. Nothing here
touches a device; `stage` prepares a host array for upload (axis moved last, cropped or zero-padded
to the length VkFFT reads, cast, contiguous) in one copy.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from lazyfuel.dtypes import DType

_COMPLEX = {np.dtype(np.float32): np.dtype(np.complex64), np.dtype(np.float64): np.dtype(np.complex128),
            np.dtype(np.complex64): np.dtype(np.complex64), np.dtype(np.complex128): np.dtype(np.complex128)}
_REAL = {c: r for r, c in _COMPLEX.items() if r.kind == "f"}


@dataclass(frozen=True)
class Transform:
    """One FFT kind as VkFFT runs it along the last axis of a (batch, points) array.

    `r2c`: a real-to-complex app (rfft forward, irfft inverse); `inverse`: call the app's `ifft`;
    `dtypes`: the input dtypes the link registry binds; `in_points(length)` / `out_points(length)`:
    the axis length VkFFT reads / writes for transform length `length` (numpy's `n`);
    `app_options`: VkFFT configuration the app is built with (see `R2C_OPTIONS`).
    """

    name: str
    r2c: bool
    inverse: bool
    dtypes: tuple[DType, ...]
    in_points: Callable[[int], int]
    out_points: Callable[[int], int]
    app_options: tuple[tuple[str, int], ...] = ()

    def upload_dtype(self, dtype: np.dtype) -> np.dtype:
        """The dtype VkFFT reads for an input of `dtype`: complex for c2c and c2r, real for r2c."""
        if self.r2c and not self.inverse:
            return np.dtype(dtype)
        return _COMPLEX[np.dtype(dtype)]

    def output_dtype(self, dtype: np.dtype) -> np.dtype:
        """The output dtype for an input of `dtype` (the contracts' complex_of / real_of)."""
        if self.r2c and self.inverse:
            return _REAL[np.dtype(dtype)]
        return _COMPLEX[np.dtype(dtype)]

    def app_dtype(self, dtype: np.dtype) -> np.dtype:
        """The dtype a pyvkfft app is built for: the real dtype for r2c apps, complex otherwise."""
        up = self.upload_dtype(dtype)
        return _REAL.get(up, up) if self.r2c else up

    def __repr__(self) -> str:
        return f"Transform({self.name})"


def _same(n: int) -> int:
    return n


def _half(n: int) -> int:
    return n // 2 + 1


# By default VkFFT merges two real rows of a batch into one complex transform (x + iy) and splits
# the result; the split leaves each row with an error relative to the larger row of its pair, so a
# quiet row next to a loud one (10^6 louder) came back with 10 % error in single precision, 1e-10
# in double: the audit's per-row bound (decision 8) failed. The callback version of the real
# transforms keeps rows apart (each within 3e-7 / 8e-16 of its own scale) at 1.5-2.5x the time on
# PoCL.
R2C_OPTIONS = (("forceCallbackVersionRealTransforms", 1),)

_C = (DType.F32, DType.F64, DType.C64, DType.C128)
TRANSFORMS: dict[str, Transform] = {
    "fft": Transform("fft", False, False, _C, _same, _same),
    "ifft": Transform("ifft", False, True, _C, _same, _same),
    "rfft": Transform("rfft", True, False, (DType.F32, DType.F64), _same, _half, R2C_OPTIONS),
    "irfft": Transform("irfft", True, True, (DType.C64, DType.C128), _half, _same, R2C_OPTIONS),
}

# numpy norm -> (pyvkfft `norm`, scale the forward transform by 1/length). pyvkfft's 1 is numpy's
# "backward" and "ortho" is numpy's; numpy's "forward" is pyvkfft's 0 (no scaling either way) plus
# 1/length on the forward transform.
NORMS: dict[str, tuple[int | str, bool]] = {"backward": (1, False), "ortho": ("ortho", False),
                                            "forward": (0, True)}


def stage(a: np.ndarray, axis: int, points: int, dtype: np.dtype, fresh: bool = False) -> np.ndarray:
    """`a` with `axis` moved last, cropped or zero-padded to `points` there, as a C-contiguous array
    of `dtype` shaped (batch, points): at most one copy, whatever `a`'s layout (a view of any kind).

    When `a` already is that (contiguous, axis last, `points` long, `dtype`) it is returned reshaped,
    without a copy, unless `fresh` asks for a copy the caller may write to.
    """
    moved = np.moveaxis(a, axis, -1)
    have = moved.shape[-1]
    batch = math.prod(moved.shape[:-1])
    if not fresh and have == points and moved.dtype == dtype and moved.flags.c_contiguous:
        return moved.reshape(batch, points)
    out = np.empty((*moved.shape[:-1], points), dtype)
    keep = min(have, points)
    out[..., :keep] = moved[..., :keep]
    if points > keep:
        out[..., keep:] = 0
    return out.reshape(batch, points)


def drop_ignored_imag(a: Any, length: int) -> None:
    """Zero, in place, the imaginary parts numpy's irfft ignores in Hermitian input `a` (batch,
    points): the zero-frequency term's, and the Nyquist term's when `length` is even and `a` holds
    its `length // 2 + 1` points. `a` is a numpy array or a device array indexed like one (CuPy)."""
    a[:, 0] = a[:, 0].real
    if length % 2 == 0 and a.shape[1] == length // 2 + 1:
        a[:, -1] = a[:, -1].real


def unstage(a: np.ndarray, out_shape: tuple[int, ...], axis: int) -> np.ndarray:
    """The inverse of `stage`'s move: a (batch, points) result laid out as `out_shape`, C-contiguous."""
    moved_shape = (*out_shape[:axis], *out_shape[axis + 1:], out_shape[axis])
    return np.ascontiguousarray(np.moveaxis(a.reshape(moved_shape), -1, axis))
