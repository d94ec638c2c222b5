"""The graph's base node, its leaves and the stand-in for a select of unknown sizes.

`Node` (shape, dtype, chunks and a deterministic `name`), the leaves `Source` (a dask array) and
`Rechunk` (a dask rechunk of a lowered node), `Unary` (a node of one input), and `Deferred`: a
select on lazy indices of unknown chunk sizes, standing for the real one until the sizes are needed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from dask.base import tokenize

from lazyfuel.graph import chunks as ch

ViewOp = tuple[str, tuple[tuple[str, Any], ...]]  # (chain view name, attrs), as in OpNode


@dataclass(frozen=True, eq=False)
class Node:
    """Base of every node: inputs, shape, numpy dtype and chunks (set by each subclass)."""

    def __post_init__(self) -> None:
        if len(self.chunks) != len(self.shape):
            raise ValueError(f"{type(self).__name__}: chunks {self.chunks} do not fit shape {self.shape}")

    @property
    def inputs(self) -> tuple[Node, ...]:
        return ()

    @property
    def shape(self) -> tuple[int, ...]:
        raise NotImplementedError

    @property
    def dtype(self) -> np.dtype:
        return self.inputs[0].dtype

    @property
    def chunks(self) -> ch.Chunks:
        raise NotImplementedError

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def label(self) -> str:
        """A short name for messages and keys (`index_select`, `transpose` …)."""
        return type(self).__name__.lower()

    def params(self) -> tuple[Any, ...]:
        """What besides the inputs determines the result (tokenized into `name`)."""
        return ()

    def attrs(self) -> tuple[tuple[str, Any], ...]:
        """The attributes of the op's chain node (`planner.chain.OpNode`), as its spec reads them."""
        return ()

    @cached_property
    def name(self) -> str:
        return f"{self.label}-{tokenize(type(self).__name__, self.params(), [i.name for i in self.inputs])}"

    def blocks(self) -> list[tuple[int, ...]]:
        """Every block index, row-major."""
        return [tuple(int(i) for i in b) for b in np.ndindex(*(len(c) for c in self.chunks))]


@dataclass(frozen=True, eq=False)
class Source(Node):
    """A dask array whose chunks are real numpy arrays at compute time.

    `one_buffer`: the chunks are views of one host buffer (a numpy array given to `from_array`),
    so a select may see several of them as one spanning view instead of reading them apart.
    `stored`: the dtype the data was given in when its byte order is not native (`>i4`); `array`
    then converts each chunk to native order as it is read (`graph.ops.native_chunks`).
    `zarr`: the zarr array the chunks are read from (`lf.from_zarr`; an array lazyfuel wrote with
    checksums: its `integrity.VerifiedChunks`), so that a select can read only the rows it
    touches (`graph.stored`); None for other sources.
    `host`: that numpy array, where the chunks are views of it in native byte order, so the
    source can be cut into other chunks without copying (`graph.grouping`); None otherwise.
    """

    array: Any  # a dask array
    one_buffer: bool = False
    stored: np.dtype | None = None
    zarr: Any = None
    host: np.ndarray | None = None

    # cached: lowering asks for them per block and argument, and dask's own are properties
    @cached_property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(n) for n in self.array.shape)

    @cached_property
    def dtype(self) -> np.dtype:
        return np.dtype(self.array.dtype)

    @cached_property
    def chunks(self) -> ch.Chunks:
        return tuple(tuple(int(n) for n in c) for c in self.array.chunks)

    @cached_property
    def name(self) -> str:
        return str(self.array.name)


@dataclass(frozen=True, eq=False)
class Unary(Node):
    """A node of one input whose shape and chunks are the input's unless a subclass says otherwise."""

    input: Node

    @property
    def inputs(self) -> tuple[Node, ...]:
        return (self.input,)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.input.shape

    @property
    def chunks(self) -> ch.Chunks:
        return self.input.chunks


@dataclass(frozen=True, eq=False)
class Rechunk(Unary):
    """`input` with other chunks (lowered through dask's rechunk; a fusion boundary)."""

    new_chunks: ch.Chunks

    @property
    def chunks(self) -> ch.Chunks:
        return self.new_chunks

    def params(self) -> tuple[Any, ...]:
        return (self.new_chunks,)


@dataclass(frozen=True, eq=False)
class Deferred(Node):
    """A select whose lazy indices have chunk sizes nobody knows yet (dask's `nonzero()`, a
    boolean selection): its `shape` and `chunks` hold NaN along the axes the indices give, as
    dask's own do. `resolved` builds the real node (`make()`: the indices' sizes computed, then
    the select built with them) once, when it is needed: to lower, explain or build on it.
    """

    make: Any  # () -> Node
    hint_shape: tuple[float, ...]
    hint_chunks: tuple[tuple[float, ...], ...]
    hint_dtype: np.dtype
    what: str  # the op's label
    token: str

    @property
    def shape(self) -> tuple[float, ...]:
        return self.hint_shape

    @property
    def chunks(self) -> tuple[tuple[float, ...], ...]:
        return self.hint_chunks

    @property
    def dtype(self) -> np.dtype:
        return self.hint_dtype

    @property
    def label(self) -> str:
        return self.what

    @cached_property
    def name(self) -> str:
        return f"{self.what}-{self.token}"

    @cached_property
    def resolved(self) -> Node:
        return self.make()


def resolved(node: Node) -> Node:
    """`node`, or the node a `Deferred` one stands for (built now, once)."""
    return node.resolved if isinstance(node, Deferred) else node


def nbytes(node: Node) -> int:
    """Bytes of the whole array `node` describes."""
    return math.prod(node.shape) * node.dtype.itemsize
