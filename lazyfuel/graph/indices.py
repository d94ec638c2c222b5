"""The indices of a select: one value type, checked once, narrowed once, one meaning.

`Indices` is what an IndexSelect or Gather node holds as its indices:

- *concrete* (numpy arrays, lists, scalars): checked when the op is built (IndexError at the
  call, as in PyTorch), block by block of the chunks the select reads them in, and kept as a
  read-only **snapshot** in the kernel's index dtype (`kernel_dtype`). A change the caller
  makes to its own array after the op was built changes nothing (numpy users expect a
  snapshot); copying is the one narrowing of concrete values.
- *lazy* (a dask array or a lazyfuel node): the dtype is checked when the op is built, each
  block's values when it is computed (`checked_block`: the same check and error text, the
  position counted in the whole index array), and narrowed there, once per block.

The kernels' index dtype is chosen per axis (`kernel_dtype`): U32 where every valid position
fits, I64 on an axis longer than 2**32 (the Cpu backend binds I64 indices; Vulkan kernels read
32-bit words, so the planner picks the Cpu binding there). Positions lazyfuel computes itself
(per-chunk reads, permutations, positions moved into a span) are made in `kernel_dtype` of the
axis they index, with `narrowed`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
from dask.base import tokenize

from lazyfuel import checks
from lazyfuel.graph import chunks as ch
from lazyfuel.graph.kept_indices import mark_snapshot

if TYPE_CHECKING:
    from lazyfuel.graph.ir import Node

HASHED_INDEX_BYTES = 1 << 20  # concrete indices up to this size are named by their bytes
U32_POSITIONS = 2**32  # an axis up to this long is indexed with U32


def kernel_dtype(extent: int) -> np.dtype:
    """The index dtype of kernels that index an axis of `extent` positions: uint32 where every
    valid position (0 <= i < extent) fits, else int64."""
    return np.dtype(np.uint32) if extent <= U32_POSITIONS else np.dtype(np.int64)


def narrowed(values: np.ndarray, extent: int, copy: bool = True) -> np.ndarray:
    """Checked positions (0 <= value < `extent`) as a C-contiguous array of `kernel_dtype(extent)`:
    the one place index values change dtype, exact since they were checked. A fresh array when
    `copy` (a snapshot), else `values` itself where it already is one."""
    dtype = kernel_dtype(extent)
    if copy:
        return np.array(values, dtype=dtype, order="C", copy=True)
    return np.ascontiguousarray(values, dtype=dtype) if values.ndim else np.asarray(values, dtype)


@dataclass(frozen=True, eq=False)
class Indices:
    """The indices of a select into an axis of `axis_len`: concrete `values` (a read-only
    snapshot in `kernel_dtype(axis_len)`, checked) or a lazy `node` (checked per block).

    `chunks` are the blocks a select reads concrete values in, and `ranges` holds the (smallest,
    largest) value of each block (row-major; None for an empty block), found while checking
    them, so lowering need not read the values again.
    """

    axis_len: int
    values: np.ndarray | None = None
    node: Node | None = None
    chunks: ch.Chunks | None = None
    ranges: tuple[tuple[int, int] | None, ...] = ()

    @classmethod
    def concrete(cls, indices: Any, axis_len: int, chunks: ch.Chunks) -> Indices:
        """Concrete indices checked now (IndexError naming the first bad value as given, and its
        position), block by block of `chunks`, then copied into a read-only snapshot."""
        values = checks.integer_indices(indices, axis_len)
        grid = ch.Grid(chunks)
        ranges = checks.index_ranges(values, axis_len, [grid.slices(b) for b in grid.blocks()])
        snapshot = narrowed(values.reshape(values.shape or (1,)), axis_len)
        snapshot.flags.writeable = False
        mark_snapshot(snapshot)  # blocks of it may stay on a device between computes
        made = cls(int(axis_len), values=snapshot, chunks=chunks, ranges=ranges)
        made.__dict__["grid"] = grid  # the cached_property, already built
        return made

    @classmethod
    def of_node(cls, node: Node, axis_len: int) -> Indices:
        """Lazy indices: their dtype checked now (TypeError for float / bool), values per block."""
        checks.integer_indices(np.empty(0, node.dtype), axis_len)
        return cls(int(axis_len), node=node)

    @property
    def lazy(self) -> bool:
        return self.node is not None

    @cached_property
    def grid(self) -> ch.Grid:
        """The chunks concrete values were checked in (lazy: the node's chunks)."""
        return ch.Grid(self.chunks if self.node is None else self.node.chunks)

    def _grid_for(self, chunks: ch.Chunks) -> ch.Grid:
        return self.grid if chunks == self.grid.chunks else ch.Grid(chunks)

    def block(self, chunks: ch.Chunks, block: tuple[int, ...]) -> np.ndarray:
        """The concrete values of `block` of the index array chunked as `chunks` (a view)."""
        return self.values[self._grid_for(chunks).slices(block)]

    def block_range(self, chunks: ch.Chunks, block: tuple[int, ...]) -> tuple[int, int] | None:
        """(smallest, largest) value of a block (None if empty): recorded when `chunks` are the
        chunks it was checked in, else computed."""
        if self.ranges and chunks == self.grid.chunks:
            return self.ranges[self.grid.number(block)]
        values = self.block(chunks, block)
        return (int(values.min()), int(values.max())) if values.size else None

    def token(self) -> str:
        """Names the indices in node names: lazy ones by their node, small concrete ones by their
        bytes, large ones (hashing 256 MB costs ~0.35 s here) by the identity of the snapshot
        this object holds, which nothing else can change or share."""
        if self.node is not None:
            return self.node.name
        if self.values.nbytes > HASHED_INDEX_BYTES:
            v = self.values
            return tokenize("lazyfuel-indices", id(v), v.__array_interface__["data"][0], v.shape,
                            v.strides, v.dtype.str)
        return tokenize(self.values)


def checked_block(chunk: Any, axis_len: int, origin: tuple[int, ...]) -> np.ndarray:
    """A computed block of lazy indices into an axis of `axis_len`, whose first element is at
    `origin` in the whole index array: checked (IndexError naming the value as given and its
    position in the whole array) and narrowed to `kernel_dtype(axis_len)`."""
    a = checks.checked_indices(np.asarray(chunk), axis_len, origin=origin)
    return narrowed(a, axis_len, copy=False)


def shifted(values: np.ndarray, start: int) -> np.ndarray:
    """Checked positions each minus `start` (0 <= start <= every value: positions into a span
    that begins at `start`), C-contiguous, in their own dtype (nothing wraps); `values` itself
    (made contiguous) when `start` is 0. Never writes into `values`."""
    if start == 0:
        return np.ascontiguousarray(values)
    return np.subtract(values, values.dtype.type(start), dtype=values.dtype)
