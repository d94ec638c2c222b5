"""Memory layouts: shape, strides in elements and a start offset, and the predicates contracts test.

A `Layout` describes where the elements of an n-d view sit inside a flat buffer of elements.
Contract documents accept or reject five properties of a layout (`contiguous`, `strided`,
`broadcast_stride0`, `start_offset`, `reverse_strides`); `Layout.violations` says which of them a
layout has. `Layout.of(a)` reads a numpy array's layout relative to the lowest byte it touches, and
`memory_span(a)` returns those bytes, so a backend can upload a view's storage once and resolve the
view on the device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np


@dataclass(frozen=True)
class Layout:
    """Shape, strides (in elements, may be 0 or negative) and offset (in elements) of a view."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0

    def __post_init__(self) -> None:
        if len(self.shape) != len(self.strides):
            raise ValueError(f"layout has {len(self.shape)} dims but {len(self.strides)} strides")
        if any(n < 0 for n in self.shape):
            raise ValueError(f"negative extent in shape {self.shape}")

    @classmethod
    def contiguous(cls, shape: tuple[int, ...] | list[int]) -> Layout:
        """The row-major layout of `shape` at offset 0 (one shared instance per shape: a Layout
        is immutable, and each block of a task asks again)."""
        return _contiguous(shape if isinstance(shape, tuple) else tuple(shape))

    @classmethod
    def of(cls, a: np.ndarray) -> Layout:
        """`a`'s layout relative to the lowest address it touches (see `memory_span`); remembered
        per (shape, byte strides, item size)."""
        return _layout_of(a.shape, a.strides, a.dtype.itemsize)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @cached_property  # a frozen dataclass: computed once per (shared) instance
    def size(self) -> int:
        """Number of elements in the view."""
        return math.prod(self.shape)

    @cached_property
    def span(self) -> int:
        """Number of elements from the lowest to the highest one touched (0 for an empty view)."""
        if self.size == 0:
            return 0
        lo = sum(min(0, (n - 1) * s) for n, s in zip(self.shape, self.strides))
        hi = sum(max(0, (n - 1) * s) for n, s in zip(self.shape, self.strides))
        return hi - lo + 1

    def _live(self) -> list[tuple[int, int]]:
        """(extent, stride) of the dims whose stride matters (extent > 1)."""
        return [(n, s) for n, s in zip(self.shape, self.strides) if n > 1]

    @property
    def is_contiguous(self) -> bool:
        """Row-major dense at offset 0 (strides of extent-1 dims do not matter)."""
        if self.offset != 0 and self.size > 0:
            return False
        expected = row_major_strides(self.shape)
        return all(s == e for n, s, e in zip(self.shape, self.strides, expected) if n > 1)

    @property
    def has_broadcast_stride0(self) -> bool:
        """Some dim of extent > 1 has stride 0 (a broadcast view)."""
        return any(s == 0 for _, s in self._live())

    @property
    def has_reverse_strides(self) -> bool:
        """Some dim of extent > 1 has a negative stride (a reversed view)."""
        return any(s < 0 for _, s in self._live())

    @property
    def has_start_offset(self) -> bool:
        """The first element is not at the start of the buffer."""
        return self.offset != 0 and self.size > 0

    @property
    def is_strided(self) -> bool:
        """Not dense row-major, for a reason other than stride 0 or negative strides alone."""
        live = self._live()
        if any(s <= 0 for _, s in live):
            positive = [(n, s) for n, s in live if s > 0]
        else:
            positive = live
        expected = 1
        for n, s in reversed(positive):
            if s != expected:
                return True
            expected *= n
        return False

    def properties(self) -> dict[str, bool]:
        """Which awkward properties this layout has, by the names contract documents use."""
        return {
            "contiguous": self.is_contiguous,
            "strided": self.is_strided,
            "broadcast_stride0": self.has_broadcast_stride0,
            "start_offset": self.has_start_offset,
            "reverse_strides": self.has_reverse_strides,
        }


def row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of a dense row-major array of `shape`."""
    strides = []
    step = 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(int(n), 1)
    return tuple(reversed(strides))


def normalize_dim(dim: int, ndim: int) -> int:
    """`dim` counted from the end when negative, as numpy and PyTorch do; IndexError if out of range.

    A 0-d array behaves as one element along dim 0 (PyTorch), so ndim 0 accepts dim 0 and -1.
    """
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"dim must be an integer, got {type(dim).__name__}")
    size = max(ndim, 1)
    if not -size <= dim < size:
        raise IndexError(f"dim {dim} is out of range for an array of {ndim} dims "
                         f"(expected {-size} <= dim < {size})")
    return int(dim) % size


def memory_span(a: np.ndarray) -> np.ndarray:
    """The bytes `a` touches, lowest address first, as a 1-d uint8 array sharing `a`'s memory.

    Together with `Layout.of(a)` this lets a backend copy a strided, reversed or broadcast view's
    storage once and resolve the view itself. The result keeps `a` alive.
    """
    layout = Layout.of(a)
    nbytes = layout.span * a.dtype.itemsize
    if nbytes == 0:
        return np.empty(0, np.uint8)
    start = a.__array_interface__["data"][0] - layout.offset * a.dtype.itemsize
    holder = _Holder(start, nbytes, readonly=not a.flags.writeable, keep=a)
    return np.asarray(holder)


class _Holder:
    """Exposes a raw byte range through the numpy array interface while keeping its owner alive."""

    def __init__(self, address: int, nbytes: int, readonly: bool, keep: np.ndarray) -> None:
        self.keep = keep
        self.__array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (address, readonly),
            "version": 3,
        }


def transpose(layout: Layout, axes: tuple[int, ...] | None = None) -> Layout:
    """The layout of `a.transpose(axes)` (reversed axes when None); moves no data."""
    axes = tuple(reversed(range(layout.ndim))) if axes is None else tuple(axes)
    if sorted(axes) != list(range(layout.ndim)):
        raise ValueError(f"axes {axes} are not a permutation of 0..{layout.ndim - 1}")
    return Layout(tuple(layout.shape[a] for a in axes), tuple(layout.strides[a] for a in axes),
                  layout.offset)


def getitem(layout: Layout, key: tuple[int | slice, ...]) -> Layout:
    """The layout of `a[key]` for basic indexing (ints and slices with any step); moves no data."""
    if len(key) > layout.ndim:
        raise IndexError(f"too many indices: {len(key)} for an array of {layout.ndim} dims")
    key = tuple(key) + (slice(None),) * (layout.ndim - len(key))
    shape, strides, offset = [], [], layout.offset
    for k, n, s in zip(key, layout.shape, layout.strides):
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            count = len(range(start, stop, step))
            if count:
                offset += start * s
            shape.append(count)
            strides.append(s * step)
        else:
            i = int(k)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for an axis of size {n}")
            offset += (i % n) * s
    if 0 in shape:
        offset = 0
    return Layout(tuple(shape), tuple(strides), offset)


def broadcast_to(layout: Layout, shape: tuple[int, ...]) -> Layout:
    """The layout of `np.broadcast_to(a, shape)`: new and size-1 dims get stride 0."""
    shape = tuple(int(n) for n in shape)
    lead = len(shape) - layout.ndim
    if lead < 0:
        raise ValueError(f"cannot broadcast shape {layout.shape} to fewer dims {shape}")
    strides = [0] * lead
    for have, want, s in zip(layout.shape, shape[lead:], layout.strides):
        if have == want:
            strides.append(s)
        elif have == 1:
            strides.append(0)
        else:
            raise ValueError(f"cannot broadcast shape {layout.shape} to {shape}")
    return Layout(shape, tuple(strides), layout.offset)


@lru_cache(maxsize=4096)
def _contiguous(shape: tuple[int, ...]) -> Layout:
    shape = tuple(int(n) for n in shape)  # numpy integers hash as the ints they equal
    return Layout(shape, row_major_strides(shape), 0)


@lru_cache(maxsize=4096)
def _layout_of(shape: tuple[int, ...], byte_strides: tuple[int, ...], itemsize: int) -> Layout:
    """`Layout.of` of an array of `shape`, `byte_strides` and `itemsize`."""
    if any(s % itemsize for s in byte_strides):
        raise ValueError(f"strides {byte_strides} are not multiples of the item size {itemsize}")
    strides = tuple(s // itemsize for s in byte_strides)
    size = math.prod(shape)
    offset = 0 if size == 0 else -sum(min(0, (n - 1) * s) for n, s in zip(shape, strides))
    return Layout(tuple(shape), strides, offset)
