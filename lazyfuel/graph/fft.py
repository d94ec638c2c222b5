"""The FFT family in lazyfuel's graph: the `Transform` node and its builder.

`transform(x, kind, axis, n, norm)` checks user input when the op is built (numpy.fft's rules and
messages, by the kind's spec: `lazyfuel.ops.fft`) and returns a `Transform` node over
`x` with the transformed axis made whole: when that axis has several chunks, `x` is rechunked
(a `Rechunk` node: dask's `rechunk({axis: -1})`); the other axes keep their chunks. Each output
block then is the transform of one input block, so a task fuses it like any other op. Nothing runs.

dtypes are numpy 2's for the four dtypes the bindings take (`lazyfuel.ops.fft.KINDS`); every
other dtype is refused with a TypeError naming the cast to make (numpy would cast ints to float64
and F16 to F32 silently; lazyfuel never coerces silently, see docs/decisions.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from lazyfuel.dtypes import DType
from lazyfuel.graph import chunks as ch
from lazyfuel.graph.ir import Node, Rechunk
from lazyfuel.ops import fft as fft_spec
from lazyfuel.ops import spec_for


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
    op_kind = fft_spec.kind_of(kind)
    out_dtype, a = fft_spec.check_args(op_kind, x.dtype, x.ndim, axis, n, norm)
    n = None if n is None else int(n)
    attrs = {"axis": a, "n": n, "norm": norm}
    _, out_shape = spec_for(op_kind).params([x.shape], DType.from_numpy(x.dtype), attrs)
    if len(x.chunks[a]) > 1:
        x = Rechunk(x, (*x.chunks[:a], (x.shape[a],), *x.chunks[a + 1:]))
    return Transform(x, kind, a, n, norm, out_dtype, int(out_shape[a]))
