"""Chains: the op-level description of one fused task, as the graph layer hands it to the planner.

A `Chain` is a straight-line list of `OpNode`s over numbered values (inputs first, as in a
`Program`). Nodes are either views (`transpose`, `getitem`, `broadcast_to`: layout only, no data
moves) or op kinds (`IndexSelect`, `Gather`, `MaskedFill`, `Contiguize`). Chains are hashable, so
plans are cached by (chain, input dtypes, input layouts, backends).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from lazyfuel.ops import specs
from lazyfuel.ops.views import VIEW_OPS, decode_key, encode_key

__all__ = ["INDEX_OPS", "VIEW_OPS", "Chain", "OpNode", "decode_key", "encode_key"]

# ops whose second argument is indices (their spec's kernels take an input named so)
INDEX_OPS = tuple(s.kind.name for s in specs() if [n for n, _ in s.inputs][1:2] == ["indices"])


@dataclass(frozen=True)
class OpNode:
    """One op: `op` is a view name or an OpKind name; `attrs` are its parameters, hashable.

    Attributes by op: transpose `axes`; getitem `key` (ints and `slice`s as tuples
    `("slice", start, stop, step)`); broadcast_to `shape`; IndexSelect/Gather `dim`;
    MaskedFill `value`; Contiguize none; Fft/Ifft/Rfft/Irfft `axis` (int, may be negative), `n`
    (int or None: numpy's default) and `norm` (None, "backward", "ortho" or "forward").
    """

    op: str
    args: tuple[int, ...]
    attrs: tuple[tuple[str, Any], ...] = ()

    @property
    def attr(self) -> dict[str, Any]:
        return dict(self.attrs)


@dataclass(frozen=True)
class Chain:
    """Nodes over numbered values; `outputs` names the values to return."""

    n_inputs: int
    nodes: tuple[OpNode, ...]
    outputs: tuple[int, ...]

    @cached_property
    def index_inputs(self) -> frozenset[int]:
        """The inputs a select reads as its indices (through views, if any): inputs of DType U32
        that a caller may give in any checked integer dtype (`backends.base.input_fits`)."""
        found = set()
        for node in self.nodes:
            if node.op in INDEX_OPS:
                value = node.args[1]
                while value >= self.n_inputs and self.nodes[value - self.n_inputs].op in VIEW_OPS:
                    value = self.nodes[value - self.n_inputs].args[0]
                if value < self.n_inputs:
                    found.add(value)
        return frozenset(found)


