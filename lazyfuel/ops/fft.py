"""The FFT family (`lf.fft`, `lf.ifft`, `lf.rfft`, `lf.irfft`): numpy.fft along one axis.

The four kinds share everything but three rules, kept here as rows of `KINDS`: the dtypes each
takes and gives (numpy 2's for the four dtypes the bindings take: fft/ifft F32 -> C64, F64 -> C128,
complex stays; rfft F32 -> C64, F64 -> C128; irfft C64 -> F32, C128 -> F64; every other dtype is
refused with a TypeError naming the cast to make: lazyfuel never coerces silently), the transform
length from the input axis (and the output axis from the length), and the input points a signal of
a given length needs. `check_args` checks user input when the op is built (numpy.fft's rules and
messages); `plan` gives the step's `FftParams` and the output shape. The references compute in
double precision and return the dtype the contracts promise; the audit compares every FFT binding
against them (normwise per transformed row, decision 8).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from lazyfuel.contracts.model import DtypeRule, KernelContract, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.layout import normalize_dim
from lazyfuel.ops.common import by_other_axis, per_row
from lazyfuel.ops.data import random_array
from lazyfuel.ops.spec import Attrs, Case, Inputs, KernelParams, OpSpec, Shape, Timed, register

C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)
F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
_COMPLEX = {F32: C64, F64: C128, C64: C64, C128: C128}


@dataclass(frozen=True)
class Kind:
    """What sets one FFT kind apart: its numpy function, accepted input dtype -> output dtype, the
    transform length when `n` is not given (from the input axis length m), the output axis length
    from the transform length, and the input points along the axis for a signal of a length."""

    numpy: Callable[..., np.ndarray]
    dtypes: dict[np.dtype, np.dtype]
    default_length: Callable[[int], int]
    out_length: Callable[[int], int]
    points_in: Callable[[int], int]
    cast: str = "float32, float64, complex64 or complex128"  # what a refused dtype should become


def _same(m: int) -> int:
    return m


KINDS: dict[OpKind, Kind] = {
    OpKind.Fft: Kind(np.fft.fft, _COMPLEX, _same, _same, _same),
    OpKind.Ifft: Kind(np.fft.ifft, _COMPLEX, _same, _same, _same),
    OpKind.Rfft: Kind(np.fft.rfft, {F32: C64, F64: C128}, _same, lambda n: n // 2 + 1, _same,
                      "float32 or float64 (x.real for complex data)"),
    OpKind.Irfft: Kind(np.fft.irfft, {C64: F32, C128: F64}, lambda m: 2 * (m - 1), _same,
                       lambda length: length // 2 + 1, "complex64 or complex128"),
}
NORMS = ("backward", "ortho", "forward")
_DOUBLE = {"f": F64, "c": C128}


@dataclass(frozen=True)
class FftParams(KernelParams):
    """The input's `shape`, the transformed `axis` (>= 0), the transform `length` (numpy's `n`),
    `norm`, and `log2_length` (ceil(log2(length)), for the cost expressions)."""

    shape: tuple[int, ...]
    axis: int
    length: int
    norm: str
    log2_length: int


def kind_of(name: str) -> OpKind:
    """The FFT op kind named `name` ("Fft" ...); ValueError naming the four."""
    found = next((k for k in KINDS if k.name == name), None)
    if found is None:
        raise ValueError(f"unknown transform {name!r}; expected one of {', '.join(k.name for k in KINDS)}")
    return found


def check_args(kind: OpKind, dtype: Any, ndim: int, axis: Any, n: Any, norm: Any) -> tuple[np.dtype, int]:
    """The output dtype and the axis (>= 0) of `kind` on data of `dtype` and `ndim` dims.

    Raises:
        TypeError: a dtype the transform does not take (the message names the cast); `axis` not an
            integer, `n` not an integer or None.
        IndexError: `axis` out of range.
        ValueError: a 0-d input; `norm` not None, "backward", "ortho" or "forward".
    """
    label = kind.name.lower()
    out_dtype = KINDS[kind].dtypes.get(np.dtype(dtype))
    if out_dtype is None:
        raise TypeError(f"{label} takes {KINDS[kind].cast} data, got {np.dtype(dtype)}; cast it first "
                        f"(e.g. a.astype(np.{'complex64' if kind is OpKind.Irfft else 'float32'}) before "
                        f"lf.from_array): lazyfuel does not cast silently")
    if ndim == 0:
        raise ValueError(f"{label} needs an array of at least one dimension, got a 0-d array")
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{label}: axis must be an integer, got {type(axis).__name__}")
    if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer))):
        raise TypeError(f"{label}: n must be an integer or None, got {type(n).__name__}")
    if not any(norm is v or norm == v for v in (None, *NORMS)) or not (norm is None or isinstance(norm, str)):
        raise ValueError(f"{label}: invalid norm {norm!r}; expected None, 'backward', "
                         f"'ortho' or 'forward'")
    return out_dtype, normalize_dim(int(axis), ndim)


def plan(kind: OpKind, shapes: Sequence[Sequence[int]], dtype: DType,
         attrs: Mapping[str, Any]) -> tuple[FftParams, Shape]:
    """Attrs `axis` (default -1), `n` (default: numpy's), `norm` (None = "backward") -> the step's
    params and the output shape (ValueError for a 0-d input, a bad `n` or `norm`, or an output
    numpy cannot index; IndexError for `axis` out of range)."""
    shape = tuple(shapes[0])
    if not shape:
        raise ValueError(f"{kind} needs an array of at least one dimension, got a 0-d array")
    axis = normalize_dim(attrs.get("axis", -1), len(shape))
    rules = KINDS[kind]
    n = attrs.get("n")
    length = rules.default_length(shape[axis]) if n is None else n
    if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 1:
        raise ValueError(f"{kind}: invalid number of data points ({length!r}) specified; "
                         f"n must be an integer >= 1")
    length = int(length)
    norm = "backward" if attrs.get("norm") is None else attrs["norm"]
    if norm not in NORMS:
        raise ValueError(f"{kind}: norm {norm!r}; expected None or one of {', '.join(NORMS)}")
    out_shape = (*shape[:axis], rules.out_length(length), *shape[axis + 1:])
    if max(length, math.prod(out_shape)) > np.iinfo(np.intp).max:
        raise ValueError(f"{kind}: n = {length} gives an output of shape {out_shape}, more elements "
                         f"than numpy can index ({np.iinfo(np.intp).max})")
    return FftParams(shape, axis, length, norm, max(1, (length - 1).bit_length())), out_shape


def out_dtype(name: str, dtype: np.dtype) -> np.dtype:
    """The output dtype of transform `name` ("fft" ...) for an input of `dtype`; TypeError naming
    the accepted ones (the CPU kernels' message)."""
    dtypes = KINDS[kind_of(name.capitalize())].dtypes
    found = dtypes.get(np.dtype(dtype))
    if found is None:
        accepted = ", ".join(str(d) for d in dtypes)
        raise TypeError(f"{name} takes {accepted} input, got {np.dtype(dtype)}; cast it first")
    return found


def reference(name: str, x: Any, n: int | None, axis: int, norm: str | None) -> np.ndarray:
    """numpy.fft's `name` of `x` (any layout) in double precision, as the dtype the contracts promise."""
    a = np.asarray(x)
    out = out_dtype(name, a.dtype)
    fn = KINDS[kind_of(name.capitalize())].numpy
    result = fn(a.astype(_DOUBLE[a.dtype.kind], copy=False), n=n, axis=axis, norm=norm)
    return np.ascontiguousarray(result.astype(out, copy=False))


def _inputs(kind: OpKind, dtypes: tuple[DType, ...], shape: Shape, dim: int, n_indices: int,
            rng: np.random.Generator) -> tuple[Inputs, Attrs]:
    """Finite data for a transform of `shape[dim]` points along `dim` (an FFT mixes every element of
    a row, so one NaN spoils it): the input axis holds the points the kind reads for that signal
    length, and `n` is given where numpy's default would differ (an odd-length irfft)."""
    length = shape[dim]
    points = KINDS[kind].points_in(length)
    data = random_array(rng, dtypes[0], (*shape[:dim], points, *shape[dim + 1:]), specials=False)
    attrs: dict[str, Any] = {"axis": dim}
    if KINDS[kind].default_length(points) != length:
        attrs["n"] = length
    return [data], attrs


LADDER_LENGTH = 4096


def _ladder(kind: OpKind, contract: KernelContract, dtypes: tuple[DType, ...], n: int,
            rng: np.random.Generator) -> tuple[Timed, ...]:
    """Rows of `min(n, LADDER_LENGTH)`-point signals, about `n` points in all, transformed along the
    last axis (as a chunk whose other axes are chunked); the steps each read the input again
    (rfft and irfft change the dtype, so their output cannot feed them)."""
    length = min(max(n, 2), LADDER_LENGTH)
    shape = (max(n // length, 1), length)
    inputs, attrs = _inputs(kind, dtypes, shape, 1, length, rng)
    return (Timed(inputs, attrs, reread=True),)


def _case(shape: Shape, dim: int, norm: str, view: str = "contiguous", n: int | None = None) -> Case:
    """An FFT case: `shape[dim]` is the signal length (see `_inputs`), `n` crops or pads it."""
    return Case(shape, dim, None, view, (("norm", norm), *((("n", n),) if n is not None else ())))


# Lengths: each of VkFFT's paths: radix kernels (a power of two; composites 12 and 1000), Rader's
# algorithm (primes p with a smooth p - 1: 17, 1009), Bluestein's (47: 46 = 2 * 23); 1-D, batched
# along the last axis and along axis 0; every norm. Each VkFFT plan (batch, length, precision,
# norm) compiles once per direction, seconds on PoCL the first time: the `n` and view cases reuse
# the plans of the plain ones.
CASES = (_case((16,), 0, "backward"), _case((3, 12), 1, "ortho"), _case((17, 2), 0, "forward"),
         _case((47,), 0, "ortho"), _case((2, 1000), 1, "forward"), _case((1009, 2), 0, "backward"),
         _case((3, 10), 1, "ortho", n=12), _case((20,), 0, "backward", n=16))
VIEW_CASES = (_case((3, 12), 1, "ortho", "transposed"), _case((16,), 0, "backward", "reversed"),
              _case((17, 2), 0, "forward", "offset-strided"), _case((2, 1000), 1, "forward", "broadcast"))

_RULES = {"complex_of": (OpKind.Fft, OpKind.Ifft, OpKind.Rfft), "real_of": (OpKind.Irfft,)}


def _spec(kind: OpKind) -> OpSpec:
    name = kind.name.lower()
    rule = next(r for r, kinds in _RULES.items() if kind in kinds)
    return OpSpec(
        kind=kind, name=name, inputs=(("source", None),), dtype_rule=DtypeRule("source", rule),
        params_type=FftParams, plan=partial(plan, kind),
        reference=lambda a, at: reference(name, a[0], at.get("n"), at.get("axis", -1), at.get("norm")),
        make_inputs=partial(_inputs, kind), ladder=partial(_ladder, kind), cases=CASES,
        view_cases=VIEW_CASES, compare=per_row, chunking=by_other_axis("axis", -1), blockwise=True)


SPECS = tuple(register(_spec(kind)) for kind in KINDS)
