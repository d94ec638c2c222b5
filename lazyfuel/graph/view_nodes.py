"""The view nodes (`Transpose`, `Slice`, `Broadcast`): they move no data; each output block is a
numpy view of exactly one block of the input, given by `input_block(block)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from lazyfuel.graph import chunks as ch
from lazyfuel.graph.nodes import Node, ViewOp
from lazyfuel.planner.chain import encode_key


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
