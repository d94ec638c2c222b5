"""numpy reference kernels: the audit reference for every backend and the fallback without a device.

Two families live here:

- **Reference functions** with the full user-facing semantics of the API (PyTorch's):
  `index_select`, `gather`, `masked_fill`, `contiguize`, defined by each op's spec
  (`lazyfuel.ops.<op>`) and re-exported here. They take any numpy array of a lazyfuel dtype in
  any layout (strided, offset, reversed, broadcast), negative dims and 0-d inputs, run the shared
  checks of `lazyfuel.checks`, and return a fresh C-contiguous array. The audit compares every
  binding against them.
- **Step functions** (`*_step`), the CPU provider's kernels: what `CpuExecutor` calls for a
  program step, with the op params of docs/internals.md. They trust the planner for shapes but
  still bounds-check indices, so a bad index raises IndexError and never reads outside the source.

Every kernel is a data mover: values are never touched arithmetically. Arrays are moved through
an unsigned-integer (or 16-byte void) view of the same width, so the result is bit-identical to
the input elements — NaN payloads, signalling NaNs, -0.0 and subnormals included.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

from lazyfuel import checks
from lazyfuel.dtypes import DType
from lazyfuel.hostcopy import take_rows
from lazyfuel.layout import memory_span
from lazyfuel.ops.bits import bits as _bits
from lazyfuel.ops.bits import checked_array as _checked_array
from lazyfuel.ops.bits import fill_word as _fill_word
from lazyfuel.ops.bits import fresh as _fresh
from lazyfuel.ops.contiguize import contiguize
from lazyfuel.ops.gather import gather
from lazyfuel.ops.index_select import index_select
from lazyfuel.ops.masked_fill import masked_fill

# ---------------------------------------------------------------------------------------------
# Step functions (what CpuExecutor runs; op params from docs/internals.md)
# ---------------------------------------------------------------------------------------------


def index_select_step(source: np.ndarray, indices: np.ndarray, *, outer_count: int,
                      source_dim_size: int, n_indices: int, inner_count: int,
                      out: np.ndarray | None = None) -> np.ndarray:
    """IndexSelect over `source` seen as [outer_count, source_dim_size, inner_count].

    Accepts `source` of any lazyfuel dtype in any layout (read in row-major logical order) and
    `n_indices` U32 (or other integer) indices. Returns a fresh contiguous array of shape
    (outer_count, n_indices, inner_count), or `out` (C-contiguous, `source`'s dtype, that many
    elements) written in place; the executor reshapes it to the step's shape.

    Raises:
        IndexError: an index >= source_dim_size (value and position).
        ValueError: the arrays' sizes disagree with the params.
    """
    _expect_size(source, outer_count * source_dim_size * inner_count, "source",
                 f"outer_count * source_dim_size * inner_count = {outer_count} * {source_dim_size} "
                 f"* {inner_count}")
    idx = checks.checked_indices(indices, source_dim_size).reshape(-1)  # np.take wants intp anyway
    _expect_size(idx, n_indices, "indices", "n_indices")
    shape = (outer_count, n_indices, inner_count)
    bits = _bits(source)
    if not bits.flags.c_contiguous:
        # np.take copies a source that is not C-contiguous whole before it takes anything (a
        # broadcast view of 10^12 elements: terabytes), and so may a reshape of the view to
        # [outer, dim, inner]: index the view itself along its own axis, reading the rows taken
        taken = _take_along(bits, idx, outer_count, source_dim_size, inner_count).reshape(shape)
        if out is None:
            return _fresh(taken, source.dtype)
        np.copyto(_into(out, source.dtype, shape), taken)
        return out
    src = bits.reshape(outer_count, source_dim_size, inner_count)
    # the indices are checked: "clip" skips numpy's second bounds check (and, with `out`, its buffer)
    if outer_count == 1:  # rows of a table (W2's gather): large results taken on several threads
        dest = np.empty(shape[1:], bits.dtype) if out is None else _into(out, source.dtype, shape)[0]
        take_rows(src[0], idx, dest, mode="clip")
        return _fresh(dest.reshape(shape), source.dtype) if out is None else out
    if out is None:
        return _fresh(np.take(src, idx, axis=1, mode="clip"), source.dtype)
    np.take(src, idx, axis=1, out=_into(out, source.dtype, shape), mode="clip")
    return out


def _take_along(bits: np.ndarray, idx: np.ndarray, outer_count: int, dim_size: int,
                inner_count: int) -> np.ndarray:
    """The rows `idx` of `bits` seen as [outer_count, dim_size, inner_count], by indexing `bits`
    in its own shape along the axis those counts describe: no copy of the source, whatever its
    layout (numpy's advanced indexing walks the view). Falls back to a reshape (which may copy)
    only if no axis of `bits` fits the counts."""
    shape = bits.shape
    for axis in range(bits.ndim):
        if (shape[axis] == dim_size and math.prod(shape[:axis]) == outer_count
                and math.prod(shape[axis + 1:]) == inner_count):
            return bits[(slice(None),) * axis + (idx,)]
    return bits.reshape(outer_count, dim_size, inner_count)[:, idx]


def gather_step(source: np.ndarray, indices: np.ndarray, *, source_shape: Sequence[int],
                output_shape: Sequence[int], dim: int, out: np.ndarray | None = None) -> np.ndarray:
    """Gather along `dim` of `source` (shape `source_shape`) by indices of shape `output_shape`.

    Accepts any lazyfuel dtype and layout for `source` and integer indices. Returns a fresh
    contiguous array of `output_shape`, or `out` (C-contiguous, `source`'s dtype, that many
    elements) written in place.

    Raises:
        IndexError: an index >= source_shape[dim] (value and position), or `dim` out of range.
        ValueError: the arrays' sizes or shapes disagree with the params.
    """
    source_shape, output_shape = tuple(source_shape), tuple(output_shape)
    _expect_size(source, math.prod(source_shape), "source", f"prod(source_shape {source_shape})")
    _expect_size(indices, math.prod(output_shape), "indices", f"prod(output_shape {output_shape})")
    d = checks.check_gather_shapes(source_shape, output_shape, dim)
    src_shape, out_shape = source_shape or (1,), output_shape or (1,)
    idx = checks.checked_indices(np.reshape(indices, out_shape), src_shape[d])  # any integer dtype
    bits = _bits(source)
    dest = None if out is None else _into(out, source.dtype, out_shape)
    if bits.flags.c_contiguous:  # one flat take: element offsets, the checked indices along `d`
        offsets = np.empty(out_shape, np.intp)
        np.multiply(idx, math.prod(src_shape[d + 1:]), out=offsets, dtype=np.intp, casting="unsafe")
        for axis in (a for a in range(len(out_shape)) if a != d):
            step = np.arange(out_shape[axis], dtype=np.intp) * math.prod(src_shape[axis + 1:])
            offsets += step.reshape((-1,) + (1,) * (len(out_shape) - axis - 1))
        taken = np.take(bits.reshape(-1), offsets, out=dest, mode="clip")
    else:
        taken = np.take_along_axis(bits.reshape(src_shape), idx.astype(np.intp, copy=False), axis=d)
        if dest is not None:
            np.copyto(dest, taken)
    if out is not None:
        return out
    return _fresh(taken.reshape(output_shape), source.dtype)


def masked_fill_step(data: np.ndarray, mask: np.ndarray, *, fill_bytes: bytes,
                     out: np.ndarray | None = None) -> np.ndarray:
    """Where `mask` is true the element's bytes become `fill_bytes`, elsewhere `data`'s.

    Accepts `data` of any lazyfuel dtype and layout, and a BOOL mask of `data`'s shape (or the
    same element count, read row-major, or a shape broadcasting to `data`'s). `fill_bytes` is one
    element of data's dtype (see `lazyfuel.checks.fill_bytes`). Returns a fresh contiguous array
    of `data`'s shape, or `out` (C-contiguous, `data`'s dtype and size) written in place.

    Raises:
        TypeError: the mask is not bool.
        ValueError: the mask does not fit `data`, or `fill_bytes` has the wrong length.
    """
    m = checks.check_mask(mask)
    if m.shape != data.shape:
        if m.size == data.size:
            m = m.reshape(data.shape)
        else:
            m = np.broadcast_to(m, checks.broadcast_mask_shape(m.shape, data.shape))
    fill = _fill_word(bytes(fill_bytes), data.dtype)
    bits = _bits(data)
    if bits.dtype.kind != "u":  # 16-byte words: no integer arithmetic
        if out is None:
            return _fresh(np.where(m, fill, bits), data.dtype)
        np.copyto(_into(out, data.dtype, data.shape), np.where(m, fill, bits))
        return out
    # branch-free, three vectorised passes: data ^ ((data ^ fill) * mask); about 3x faster than
    # np.where's per-element choice on a random mask
    dest = np.empty(data.shape, bits.dtype) if out is None else _into(out, data.dtype, data.shape)
    np.bitwise_xor(bits, fill, out=dest)
    np.multiply(dest, m, out=dest)
    np.bitwise_xor(dest, bits, out=dest)
    return dest.view(data.dtype) if out is None else out


def contiguize_step(span_or_array: np.ndarray, *, shape: Sequence[int], strides: Sequence[int],
                    offset: int, dtype: DType | str | None = None,
                    out: np.ndarray | None = None) -> np.ndarray:
    """The view (`shape`, `strides`, `offset`, in elements) of a memory span, copied contiguous.

    `span_or_array` is either a value of the program (any lazyfuel dtype and layout; the params
    are relative to `lazyfuel.layout.memory_span` of it, as the planner computes them), or, when
    `dtype` is given, raw bytes: a 1-d uint8 memory span read as elements of `dtype`. Strides may
    be 0 (broadcast) or negative (reversed). Returns a fresh contiguous array of `shape`, or
    `out` (C-contiguous, of that dtype and size) written in place.

    Raises:
        ValueError: the view would reach outside the span, or shape and strides differ in length.
        TypeError: the array has no lazyfuel dtype, or `dtype` is given with a non-uint8 span.
    """
    shape, strides, offset = tuple(int(n) for n in shape), tuple(int(s) for s in strides), int(offset)
    if dtype is None:
        a = _checked_array(span_or_array)
        elems = memory_span(a).view(a.dtype)
    else:
        raw = np.asarray(span_or_array)
        if raw.dtype != np.uint8 or raw.ndim != 1:
            raise TypeError(f"a raw memory span must be a 1-d uint8 array, got {raw.dtype} {raw.shape}")
        elems = np.ascontiguousarray(raw).view(DType.parse(dtype).numpy)
    if len(shape) != len(strides):
        raise ValueError(f"contiguize: shape {shape} has {len(shape)} dims but strides {strides} "
                         f"has {len(strides)}")
    if math.prod(shape) == 0:
        return np.empty(shape, elems.dtype) if out is None else out
    lo = offset + sum(min(0, (n - 1) * s) for n, s in zip(shape, strides))
    hi = offset + sum(max(0, (n - 1) * s) for n, s in zip(shape, strides))
    if lo < 0 or hi >= elems.size:
        raise ValueError(f"contiguize: the view (shape {shape}, strides {strides}, offset {offset}) "
                         f"reaches elements {lo}..{hi}, outside the span of {elems.size} elements")
    itemsize = elems.dtype.itemsize
    view = as_strided(_bits(elems)[offset:], shape, tuple(s * itemsize for s in strides),
                      writeable=False)
    if out is None:
        return np.array(view, order="C", copy=True).view(elems.dtype)
    np.copyto(_into(out, elems.dtype, shape), view)
    return out


def _into(out: np.ndarray, dtype: np.dtype, shape: Sequence[int]) -> np.ndarray:
    """`out` as raw words of `shape` to write a result of `dtype` into (ValueError unless it is a
    C-contiguous array of `dtype` with that many elements)."""
    if out.dtype != dtype or out.size != math.prod(shape) or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous {dtype} array of {math.prod(shape)} elements, "
                         f"got {out.dtype} {out.shape} (contiguous={out.flags.c_contiguous})")
    return _bits(out).reshape(tuple(shape))


def _expect_size(a: np.ndarray, expected: int, name: str, formula: str) -> None:
    if np.size(a) != expected:
        raise ValueError(f"{name} has {np.size(a)} elements (shape {np.shape(a)}), "
                         f"expected {formula} = {expected}")


__all__ = [
    "contiguize", "contiguize_step", "gather", "gather_step", "index_select", "index_select_step",
    "masked_fill", "masked_fill_step",
]
