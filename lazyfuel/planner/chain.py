"""Chains: the op-level description of one fused task, as the graph layer hands it to the planner.

A `Chain` is a straight-line list of `OpNode`s over numbered values (inputs first, as in a
`Program`). Nodes are either views (`transpose`, `getitem`, `broadcast_to`: layout only, no data
moves) or op kinds (`IndexSelect`, `Gather`, `MaskedFill`, `Contiguize`). Chains are hashable, so
plans are cached by (chain, input dtypes, input layouts, backends).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

VIEW_OPS = ("transpose", "getitem", "broadcast_to")


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


def encode_key(key: tuple[int | slice, ...]) -> tuple[Any, ...]:
    """A basic-indexing key in hashable form (slices as tuples)."""
    return tuple(("slice", k.start, k.stop, k.step) if isinstance(k, slice) else int(k) for k in key)


def decode_key(key: tuple[Any, ...]) -> tuple[int | slice, ...]:
    """The inverse of `encode_key`."""
    return tuple(slice(*k[1:]) if isinstance(k, tuple) else k for k in key)
