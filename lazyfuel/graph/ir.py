"""lazyfuel's own graph: the immutable op nodes behind every `lazyfuel.Array`.

A node knows its shape, numpy dtype, chunks and a deterministic `name` (a token of its op, its
parameters and its inputs' names), and nothing about how it will run. There are

- leaves: `Source` (a dask array) and `Rechunk` (a dask rechunk of a lowered node);
- views (`Transpose`, `Slice`, `Broadcast`): they move no data; each output block is a numpy view
  of exactly one block of the input, given by `input_block(block)`;
- ops (`Contiguize`, `MaskedFill`, `IndexSelect`, `Gather`, and `graph.fft.Transform`): what
  kernels run; each names its `op_kind`;
- `Deferred`: a select on lazy indices of unknown chunk sizes, standing for the real one until
  the sizes are needed.

Building nodes does no checking of user input (`graph.ops` does that) and runs nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from dask.base import tokenize

from lazyfuel.graph import chunks as ch
from lazyfuel.graph.indices import HASHED_INDEX_BYTES, Indices  # noqa: F401 (HASHED_: re-exported)
from lazyfuel.planner.chain import encode_key

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
    """

    array: Any  # a dask array
    one_buffer: bool = False
    stored: np.dtype | None = None
    zarr: Any = None

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


class View(Node):
    """A node whose every output block is a numpy view of one input block."""

    input: Node

    @property
    def inputs(self) -> tuple[Node, ...]:
        return (self.input,)

    def input_block(self, block: tuple[int, ...]) -> tuple[tuple[int, ...], ViewOp]:
        """The input block that output `block` views, and the view op taking one to the other."""
        raise NotImplementedError


@dataclass(frozen=True, eq=False)
class Transpose(View):
    input: Node
    axes: tuple[int, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.input.shape[a] for a in self.axes)

    @property
    def chunks(self) -> ch.Chunks:
        return tuple(self.input.chunks[a] for a in self.axes)

    def params(self) -> tuple[Any, ...]:
        return (self.axes,)

    def input_block(self, block):
        source = [0] * len(block)
        for out_axis, in_axis in enumerate(self.axes):
            source[in_axis] = block[out_axis]
        return tuple(source), ("transpose", (("axes", self.axes),))


@dataclass(frozen=True, eq=False)
class Slice(View):
    """Basic indexing: `key` holds, per input axis, an int (the axis goes) or a normalised slice."""

    input: Node
    key: tuple[int | slice, ...]

    @cached_property
    def _pieces(self) -> dict[int, list[ch.SlicePiece]]:
        return {axis: ch.slice_pieces(self.input.chunks[axis], k.start, k.stop, k.step)
                for axis, k in enumerate(self.key) if isinstance(k, slice)}

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(range(k.start, k.stop, k.step)) for k in self.key if isinstance(k, slice))

    @cached_property
    def chunks(self) -> ch.Chunks:
        return tuple(tuple(len(range(*p.local.indices(self.input.chunks[axis][p.block])))
                           for p in self._pieces[axis])
                     for axis, k in enumerate(self.key) if isinstance(k, slice))

    def params(self) -> tuple[Any, ...]:
        return (encode_key(self.key),)

    def input_block(self, block):
        source, local, out = [], [], iter(block)
        for axis, k in enumerate(self.key):
            if isinstance(k, slice):
                piece = self._pieces[axis][next(out)]
                source.append(piece.block)
                local.append(piece.local)
            else:
                b, pos = ch.locate(self.input.chunks[axis], k)
                source.append(b)
                local.append(pos)
        return tuple(source), ("getitem", (("key", encode_key(tuple(local))),))


@dataclass(frozen=True, eq=False)
class Broadcast(View):
    """`np.broadcast_to(input, shape)`; new and stretched dims are chunked as `out_chunks` says."""

    input: Node
    target: tuple[int, ...]
    out_chunks: ch.Chunks

    @property
    def shape(self) -> tuple[int, ...]:
        return self.target

    @property
    def chunks(self) -> ch.Chunks:
        return self.out_chunks

    def params(self) -> tuple[Any, ...]:
        return (self.target, self.out_chunks)

    def input_block(self, block):
        lead = len(self.target) - self.input.ndim
        source = tuple(0 if have != want else b for have, want, b
                       in zip(self.input.shape, self.target[lead:], block[lead:]))
        shape = ch.block_shape(self.out_chunks, block)
        return source, ("broadcast_to", (("shape", shape),))


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
