"""The fusion pass: which nodes run together, and the recipe of each fused task.

`Partition.of(root)` decides which nodes are lowered on their own (their blocks become dask keys
that other tasks read): sources and rechunks; ops used by more than one consumer (so they run
once); the source of a select along an axis of several chunks when that source is computed (a
task can only read *chunks* from several blocks); and lazy indices. Everything else between a node
and those leaves fuses: `view → Contiguize → select → select …` on one output block becomes one
task, one `Chain`, one program. A select whose source chunks are separate buffers, with a block
that hits several of them, is read per source chunk (`graph.pieces`): its group takes the
pieces that the select's read tasks cut for each block (`Assembled`), not the chunks themselves;
such a gather is a group of its own, since its block is permuted as 1-d elements and reshaped.
Given a `prefer` rule (`graph.family.Families`: the backend each op prefers), an op whose
preferred backend differs from its consumer's is lowered on its own too: a chain never mixes
families (select ops on Vulkan, an FFT on OpenCL), since one program runs on one backend.

`recipe(partition, root, block)` walks from `root` down to the leaves for one output block: views
of leaf chunks become numpy views (free; the planner sees their layouts), views of intermediates
become chain view nodes, ops become chain op nodes, and views on top of the root become numpy
views of the result.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lazyfuel.graph import chunks as ch
from lazyfuel.graph.indices import kernel_dtype
from lazyfuel.graph.ir import (
    Gather,
    Node,
    Rechunk,
    Select,
    Source,
    View,
    ViewOp,
)
from lazyfuel.graph.pieces import PiecePlan, base_leaf, plan_pieces, wants_pieces
from lazyfuel.graph.span import gap_allows, span_is_cheap
from lazyfuel.graph.stored import StoredReader, chunk_of
from lazyfuel.graph.task import ArgMeta, Assembled, BlockRecipe, Const, Gathered, LazyIndex, Part, Reader
from lazyfuel.ops import find
from lazyfuel.planner.chain import Chain, OpNode

Key = tuple[Any, ...]
Block = tuple[int, ...]
EXACT_HITS = 1 << 16  # index blocks larger than this, over views of one buffer, read a hit range


@dataclass(frozen=True)
class Partition:
    """The names of the nodes lowered on their own, and the selects read per source chunk (with
    their piece plans); see the module docstring."""

    separate: frozenset[str]
    pieces: dict[str, PiecePlan] = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def of(cls, root: Node, prefer: Callable[[Node], Any] | None = None) -> Partition:
        """The partition of `root`'s graph; `prefer(op)` (if given) names the backend an op node
        prefers, and an op is cut from a consumer that prefers another."""
        order = topological(root)
        paths: Counter[str] = Counter({root.name: 1})
        for node in order:  # parents before children
            for child in node.inputs:
                paths[child.name] += paths[node.name]
        separate = set()
        for node in order:
            if node is not root and _is_op(node) and paths[node.name] > 1:
                separate.add(node.name)
            if isinstance(node, Select):
                if node.indices.node is not None:
                    separate.add(node.indices.node.name)
                if len(node.data.chunks[node.dim]) > 1:
                    base = _below_views(node.data)
                    if _is_op(base):
                        separate.add(base.name)
            if prefer is not None and _is_op(node):
                for child in node.inputs:
                    base = _below_views(child)
                    if _is_op(base) and prefer(base) != prefer(node):
                        separate.add(base.name)
        pieces = {}
        for node in order:
            if isinstance(node, Select) and wants_pieces(node, base_leaf(node.data)):
                pieces[node.name] = plan_pieces(node)
                if isinstance(node, Gather):  # its 1-d result is reshaped: a group of its own
                    separate.add(node.name)
        return cls(frozenset(separate), pieces)

    def rooted_at(self, root: Node) -> Partition:
        """This partition as seen by the group of `root` (which is computed, not read)."""
        if root.name not in self.separate:
            return self
        return Partition(self.separate - {root.name}, self.pieces)

    def is_leaf(self, node: Node) -> bool:
        """Read as dask chunks (not computed inside the task that uses it)."""
        return isinstance(node, (Source, Rechunk)) or node.name in self.separate

    def resolvable(self, node: Node) -> bool:
        """A leaf, or views of one: its blocks are numpy views of leaf chunks."""
        while isinstance(node, View) and not self.is_leaf(node):
            node = node.input
        return self.is_leaf(node)

    def leaves(self, root: Node) -> list[Node]:
        """The leaves `root`'s own group reads (not below other leaves), each once."""
        found: dict[str, Node] = {}
        stack = list(root.inputs)
        while stack:
            node = stack.pop()
            if self.is_leaf(node):
                found.setdefault(node.name, node)
            else:
                stack.extend(node.inputs)
        return list(found.values())


def _is_op(node: Node) -> bool:
    return not isinstance(node, (Source, Rechunk, View))


def _one_buffer(node: Node) -> bool:
    """`node` is views of a source whose chunks are views of one buffer (see `Source`)."""
    base = _below_views(node)
    return isinstance(base, Source) and base.one_buffer


def _below_views(node: Node) -> Node:
    while isinstance(node, View):
        node = node.input
    return node


def topological(root: Node) -> list[Node]:
    """Every node reachable from `root`, each after all of its consumers."""
    seen: set[str] = set()
    post: list[Node] = []
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            post.append(node)
            continue
        if node.name in seen:
            continue
        seen.add(node.name)
        stack.append((node, True))
        stack.extend((child, False) for child in node.inputs)
    return list(reversed(post))


@dataclass
class _Builder:
    """Collects task arguments, program inputs and chain nodes for one output block."""

    partition: Partition
    keys: dict[Key, int] = field(default_factory=dict)
    metas: list[ArgMeta] = field(default_factory=list)
    inputs: list[Any] = field(default_factory=list)
    n_program_inputs: int = 0
    nodes: list[tuple[str, tuple[tuple[str, int], ...], tuple[tuple[str, Any], ...]]] = field(
        default_factory=list)
    reshape: tuple[int, ...] | None = None  # a gather's elements, reshaped to the block after

    def key_arg(self, key: Key, meta: ArgMeta) -> int:
        if key not in self.keys:
            self.keys[key] = len(self.keys)
            self.metas.append(meta)
        return self.keys[key]

    def arg(self, leaf: Node, block: tuple[int, ...]) -> int:
        key = (leaf.name, *block)
        found = self.keys.get(key)
        if found is not None:
            return found
        return self.key_arg(key, (ch.block_shape(leaf.chunks, block), leaf.dtype))

    def part(self, node: Node, block: tuple[int, ...]) -> Part:
        views: list[ViewOp] = []
        while isinstance(node, View) and not self.partition.is_leaf(node):
            block, op = node.input_block(block)
            views.append(op)
            node = node.input
        return Part(self.arg(node, block), tuple(reversed(views)))

    def add_input(self, spec: Any, count: int = 1) -> list[tuple[str, int]]:
        self.inputs.append(spec)
        refs = [("in", self.n_program_inputs + i) for i in range(count)]
        self.n_program_inputs += count
        return refs

    def add_node(self, op: str, args: tuple[tuple[str, int], ...],
                 attrs: tuple[tuple[str, Any], ...] = ()) -> tuple[str, int]:
        self.nodes.append((op, args, attrs))
        return ("node", len(self.nodes) - 1)

    def emit(self, node: Node, block: tuple[int, ...]) -> tuple[str, int]:
        if self.partition.resolvable(node):
            return self.add_input(self.part(node, block))[0]
        if isinstance(node, View):
            child_block, (op, attrs) = node.input_block(block)
            return self.add_node(op, (self.emit(node.input, child_block),), attrs)
        spec = find(getattr(node, "op_kind", ""))
        if spec is not None and spec.blockwise:  # the same block of each input (an FFT's axis is one chunk)
            args = tuple(self.emit(i, block) for i in node.inputs)
            return self.add_node(spec.kind.name, args, node.attrs())
        if isinstance(node, Select):
            return self.select(node, block)
        raise TypeError(f"cannot fuse a {type(node).__name__} node")

    def select(self, node: Select, block: tuple[int, ...]) -> tuple[str, int]:
        if node.name in self.partition.pieces:
            return self.assembled(self.partition.pieces[node.name], block)
        index = self.index(node, block)
        if self.partition.resolvable(node.data):
            axis = node.data_axis
            if isinstance(index, Const) and index.value.size > EXACT_HITS and _one_buffer(node.data):
                # Views of one buffer are spanned, not copied: every chunk between the lowest
                # and the highest hit costs nothing to pass, and finding the exact hits of
                # millions of indices would cost more than the select. The lowest and highest
                # were found when the indices were checked.
                bounds = node.indices.block_range(node.index_chunks, node.index_block(block))
                dim_blocks = axis.hit_range(bounds)
            elif isinstance(index, Const):
                dim_blocks = axis.hits(index.value) or (0,)
            else:
                dim_blocks = tuple(range(len(axis)))
            starts = tuple(axis.begin[b] for b in dim_blocks)
            parts = tuple(self.part(node.data, node.data_block(block, b)) for b in dim_blocks)
            extents = [axis.extents[b] for b in dim_blocks]
            spannable = gap_allows(starts, extents) or span_is_cheap(
                parts[0].signature(self.metas)[0][1], node.dim, starts, extents)
            # the program's source: a span from the first part to the last, or the parts joined
            reach = starts[-1] + extents[-1] - starts[0] if spannable else sum(extents)
            spec = Gathered(parts, starts, node.dim, index, spannable, reach)
            data, idx = self.add_input(spec, 2)
        else:  # a computed source with one chunk along dim (Partition made the others leaves)
            data = self.emit(node.data, node.data_block(block, 0))
            (idx,) = self.add_input(index)
        return self.add_node(node.op_kind, (data, idx), (("dim", node.dim),))

    def assembled(self, plan: PiecePlan, block: tuple[int, ...]) -> tuple[str, int]:
        """The select's block from the pieces its read tasks cut for it, then permuted."""
        node = plan.select
        pieces, perm, extent = plan.blocks.get(block, ((), np.empty(0, kernel_dtype(0)), 0))
        args = tuple((self.key_arg(pieces_key(node, s), ((), node.dtype)), j) for s, j in pieces)
        if plan.flat:
            shape, axis = (extent,), 0
            self.reshape = ch.block_shape(node.chunks, block)
        else:
            full = list(ch.block_shape(node.data.chunks, node.data_block(block, 0)))
            full[node.dim] = extent
            shape, axis = tuple(full), node.dim
        data, idx = self.add_input(Assembled(args, axis, Const(perm), shape, node.dtype), 2)
        return self.add_node("IndexSelect", (data, idx), (("dim", axis),))

    def index(self, node: Select, block: tuple[int, ...]) -> Const | LazyIndex:
        index_block, grid = node.index_block(block), node.index_grid
        if node.indices.node is None:
            return Const(node.indices.values[grid.slices(index_block)])
        origin = grid.origin(index_block)
        return LazyIndex(self.arg(node.indices.node, index_block), node.indices.axis_len, origin)

    def chain(self, output: tuple[str, int]) -> Chain:
        n = self.n_program_inputs

        def number(ref: tuple[str, int]) -> int:
            return ref[1] if ref[0] == "in" else n + ref[1]

        nodes = tuple(OpNode(op, tuple(number(a) for a in args), attrs) for op, args, attrs in self.nodes)
        return Chain(n, nodes, (number(output),))


@dataclass(frozen=True)
class Task:
    """One fused task: its recipe, the dask keys it reads (in argument order) and their metas."""

    recipe: BlockRecipe
    keys: tuple[Key, ...]
    metas: tuple[ArgMeta, ...]


def recipe(partition: Partition, root: Node, block: tuple[int, ...]) -> Task:
    """The fused task computing `block` of `root` (a node that is not a Source or Rechunk)."""
    partition = partition.rooted_at(root)
    builder = _Builder(partition)
    post: list[ViewOp] = []
    node, node_block = root, block
    while isinstance(node, View) and not partition.resolvable(node):
        node_block, op = node.input_block(node_block)
        post.append(op)
        node = node.input
    if partition.resolvable(node):
        builder.add_input(builder.part(node, node_block))
        chain = None
    else:
        chain = builder.chain(builder.emit(node, node_block))
    if builder.reshape is not None:
        post.append(("reshape", (("shape", builder.reshape),)))
    made = BlockRecipe(tuple(builder.inputs), chain, tuple(reversed(post)),
                       ch.block_shape(root.chunks, block), root.dtype)
    return Task(made, tuple(builder.keys), tuple(builder.metas))


def pieces_key(select: Node, data_block: tuple[int, ...]) -> Key:
    """How a fused task names the result of `select`'s read task for `data_block`."""
    return (("pieces", select.name), *data_block)


def read_tasks(partition: Partition, plan: PiecePlan
               ) -> list[tuple[Block, Reader | StoredReader, tuple[Key, ...]]]:
    """Every read task of a select read per source chunk: its source block, recipe and the one
    chunk key it reads; a select straight over a zarr source reads its store itself
    (`graph.stored`: no chunk key)."""
    node = plan.select
    found = []
    for data_block, (positions, bounds) in plan.reads.items():
        if isinstance(node.data, Source) and node.data.zarr is not None:
            arr, chunks = node.data.zarr, node.data.chunks
            region = ch.block_slices(chunks, data_block)
            chunk = chunk_of(arr, chunks, data_block)
            found.append((data_block, StoredReader(arr, region, chunk, positions, bounds, node.dim,
                                                   flat=plan.flat), ()))
            continue
        builder = _Builder(partition)
        part = builder.part(node.data, data_block)
        found.append((data_block, Reader(part, positions, bounds, node.dim, plan.flat), tuple(builder.keys)))
    return found
