"""The op nodes that kernels run (`Contiguize`, `MaskedFill`, `IndexSelect`, `Gather`; the FFT's is
`graph.fft.Transform`): each names its `op_kind`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from dask.base import tokenize

from lazyfuel.graph import chunks as ch
from lazyfuel.graph.indices import Indices
from lazyfuel.graph.nodes import Node, Unary


@dataclass(frozen=True, eq=False)
class Contiguize(Unary):
    """An explicit copy into a fresh contiguous array."""

    op_kind = "Contiguize"


@dataclass(frozen=True, eq=False)
class MaskedFill(Node):
    """`data` with `value` where `mask` (bool, data's shape and chunks) is true."""

    data: Node
    mask: Node
    value: Any
    op_kind = "MaskedFill"

    @property
    def inputs(self) -> tuple[Node, ...]:
        return (self.data, self.mask)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape

    @property
    def chunks(self) -> ch.Chunks:
        return self.data.chunks

    @property
    def label(self) -> str:
        return "masked_fill"

    def params(self) -> tuple[Any, ...]:
        return (type(self.value).__name__, tokenize(self.value))

    def attrs(self) -> tuple[tuple[str, Any], ...]:
        return (("value", self.value),)


@dataclass(frozen=True, eq=False)
class Select(Node):
    """IndexSelect or Gather of `data` along `dim`; output chunks are chosen by `graph.ops`."""

    data: Node
    dim: int
    indices: Indices
    out_shape: tuple[int, ...]
    out_chunks: ch.Chunks

    op_kind = ""

    @property
    def inputs(self) -> tuple[Node, ...]:
        return (self.data,) if self.indices.node is None else (self.data, self.indices.node)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.out_shape

    @property
    def chunks(self) -> ch.Chunks:
        return self.out_chunks

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    def params(self) -> tuple[Any, ...]:
        return (self.dim, self.indices.token(), self.out_chunks)

    @property
    def index_chunks(self) -> ch.Chunks:
        """The chunks of the index array, one block per block of output along the index's axes."""
        raise NotImplementedError

    @cached_property
    def index_grid(self) -> ch.Grid:
        """`index_chunks` as a `Grid` (built once: lowering looks up every block)."""
        chunks = self.index_chunks
        return self.indices.grid if chunks == self.indices.grid.chunks else ch.Grid(chunks)

    @cached_property
    def data_axis(self) -> ch.Axis:
        """The source's chunks along `dim` as an `Axis` (built once)."""
        return ch.Axis(self.data.chunks[self.dim])

    def index_block(self, block: tuple[int, ...]) -> tuple[int, ...]:
        """The block of the index array that output `block` uses."""
        raise NotImplementedError

    def data_block(self, block: tuple[int, ...], dim_block: int) -> tuple[int, ...]:
        """The data block read by output `block` for chunk `dim_block` along `dim`."""
        raise NotImplementedError


class IndexSelect(Select):
    op_kind = "IndexSelect"

    @property
    def label(self) -> str:
        return "index_select"

    @property
    def index_chunks(self):
        return (self.out_chunks[self.dim],)

    def index_block(self, block):
        return (block[self.dim],)

    def data_block(self, block, dim_block):
        return (*block[:self.dim], dim_block, *block[self.dim + 1:])


class Gather(Select):
    op_kind = "Gather"

    @property
    def label(self) -> str:
        return "gather"

    @property
    def index_chunks(self):
        return self.out_chunks

    def index_block(self, block):
        return block

    def data_block(self, block, dim_block):
        return (*block[:self.dim], dim_block, *block[self.dim + 1:])
