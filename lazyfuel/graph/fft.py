"""The FFT family in lazyfuel's graph: the `Transform` node and its builder.

`transform(x, kind, axis, n, norm)` checks user input when the op is built (numpy.fft's rules and
messages, through the planner's `PARAMS` row for the kind) and returns a `Transform` node over
`x` with the transformed axis made whole: when that axis has several chunks, `x` is rechunked
(a `Rechunk` node: dask's `rechunk({axis: -1})`); the other axes keep their chunks. Each output
block then is the transform of one input block, so a task fuses it like any other op. Nothing runs.

dtypes are numpy 2's for the four dtypes the bindings take (fft/ifft: F32 -> C64, F64 -> C128,
complex stays; rfft: F32 -> C64, F64 -> C128; irfft: C64 -> F32, C128 -> F64). Every other dtype
is refused with a TypeError naming the cast to make (numpy would cast ints to float64 and F16 to
F32 silently; lazyfuel never coerces silently, see docs/decisions.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from lazyfuel.contracts.model import OpKind
from lazyfuel.dtypes import DType
from lazyfuel.graph import chunks as ch
from lazyfuel.graph.ir import Node, Rechunk
from lazyfuel.layout import normalize_dim
from lazyfuel.planner.plan import PARAMS

C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)
F32, F64 = np.dtype(np.float32), np.dtype(np.float64)

# kind -> {input dtype: output dtype}; what the FFT bindings of every provider declare.
DTYPES: dict[str, dict[np.dtype, np.dtype]] = {
    "Fft": {F32: C64, F64: C128, C64: C64, C128: C128},
    "Ifft": {F32: C64, F64: C128, C64: C64, C128: C128},
    "Rfft": {F32: C64, F64: C128},
    "Irfft": {C64: F32, C128: F64},
}
# The cast that makes each refused dtype acceptable, for the TypeError.
_CASTS = {"Rfft": "float32 or float64 (x.real for complex data)", "Irfft": "complex64 or complex128"}
NORMS = (None, "backward", "ortho", "forward")


@dataclass(frozen=True, eq=False)
class Transform(Node):
    """numpy.fft's `kind` (Fft, Ifft, Rfft, Irfft) of `input` along `axis` (>= 0, one chunk).

    `n` is numpy's (None: the default length); `out_dtype` and `out_length` (the output's extent
    along `axis`) are fixed by `transform`.
    """

    input: Node
    kind: str
    axis: int
    n: int | None
    norm: str | None
    out_dtype: np.dtype
    out_length: int

    @property
    def op_kind(self) -> str:
        return self.kind

    @property
    def inputs(self) -> tuple[Node, ...]:
        return (self.input,)

    @property
    def shape(self) -> tuple[int, ...]:
        s = self.input.shape
        return (*s[:self.axis], self.out_length, *s[self.axis + 1:])

    @property
    def dtype(self) -> np.dtype:
        return self.out_dtype

    @property
    def chunks(self) -> ch.Chunks:
        c = self.input.chunks
        return (*c[:self.axis], (self.out_length,), *c[self.axis + 1:])

    @property
    def label(self) -> str:
        return self.kind.lower()

    def params(self) -> tuple[Any, ...]:
        return (self.kind, self.axis, self.n, self.norm)

    def attrs(self) -> tuple[tuple[str, Any], ...]:
        """The chain node's attributes, as the planner's FFT rows read them."""
        return (("axis", self.axis), ("n", self.n), ("norm", self.norm))


def transform(x: Node, kind: str, axis: Any = -1, n: Any = None, norm: Any = None) -> Node:
    """numpy.fft's `kind` of `x` along `axis`, lazily (see the module docstring).

    Raises:
        TypeError: a dtype the transform does not take (the message names the cast).
        IndexError: `axis` out of range (numpy raises AxisError, a subclass of IndexError).
        ValueError: a 0-d `x`; `n` not an integer >= 1 (irfft's default n = 2 * (m - 1) must be
            >= 1 too); `norm` not None, "backward", "ortho" or "forward".
    """
    if kind not in DTYPES:
        raise ValueError(f"unknown transform {kind!r}; expected one of {', '.join(DTYPES)}")
    out_dtype = DTYPES[kind].get(np.dtype(x.dtype))
    if out_dtype is None:
        takes = _CASTS.get(kind, "float32, float64, complex64 or complex128")
        raise TypeError(f"{kind.lower()} takes {takes} data, got {np.dtype(x.dtype)}; cast it first "
                        f"(e.g. a.astype(np.{'complex64' if kind == 'Irfft' else 'float32'}) before "
                        f"lf.from_array): lazyfuel does not cast silently")
    if x.ndim == 0:
        raise ValueError(f"{kind.lower()} needs an array of at least one dimension, got a 0-d array")
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{kind.lower()}: axis must be an integer, got {type(axis).__name__}")
    if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer))):
        raise TypeError(f"{kind.lower()}: n must be an integer or None, got {type(n).__name__}")
    if not any(norm is v or norm == v for v in NORMS) or not (norm is None or isinstance(norm, str)):
        raise ValueError(f"{kind.lower()}: invalid norm {norm!r}; expected None, 'backward', "
                         f"'ortho' or 'forward'")
    a = normalize_dim(int(axis), x.ndim)
    n = None if n is None else int(n)
    attrs = {"axis": a, "n": n, "norm": norm}
    _, out_shape = PARAMS[OpKind.parse(kind)]([x.shape], DType.from_numpy(x.dtype), attrs)
    if len(x.chunks[a]) > 1:
        x = Rechunk(x, (*x.chunks[:a], (x.shape[a],), *x.chunks[a + 1:]))
    return Transform(x, kind, a, n, norm, out_dtype, int(out_shape[a]))
