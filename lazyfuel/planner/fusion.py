"""Planned fusions: an index_select whose only reader is a masked_fill may run as one SelectFill.

The planner (`plan._Builder`) plans such a pair both ways and keeps the cheaper: the two steps (an
index_select binding, then a masked_fill binding reading its result), or one binding of op kind
SelectFill reading the select's source and indices and the fill's mask (on Vulkan the
`select_fill` kernel: the selected rows never reach device memory). The choice is a `Choice` of
the program like any other (`explain` shows both plans and their costs). Where the fused binding
may run is its contract's business (`caps.device_kinds`, `caps.misfit`: GPUs, rows of whole
16-byte words); a backend without a SelectFill binding (numpy) keeps the pair without a choice.

Pinned kernels (`lazyfuel.config.pin_kernels`) decide before costs: a pinned fused kernel is taken
wherever it can run; a pinned kernel of the pair keeps the pair (unless the fused one is pinned too).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from lazyfuel.contracts.model import OpKind
from lazyfuel.planner.chain import Chain, OpNode


def fusable_pairs(chain: Chain) -> dict[int, int]:
    """{masked_fill node: index_select node} for each IndexSelect node whose value only that
    MaskedFill node reads, as its data (no view between), and the chain does not return."""
    n_in = chain.n_inputs
    reads = Counter(a for node in chain.nodes for a in node.args)
    reads.update(chain.outputs)
    pairs = {}
    for j, node in enumerate(chain.nodes):
        if node.op != OpKind.MaskedFill.name:
            continue
        i = node.args[0] - n_in
        if i >= 0 and chain.nodes[i].op == OpKind.IndexSelect.name and reads[node.args[0]] == 1:
            pairs[j] = i
    return pairs


def fused_node(select: OpNode, fill: OpNode) -> OpNode:
    """The SelectFill node doing `fill` of `select`'s result: (source, indices, mask), dim and value."""
    return OpNode(OpKind.SelectFill.name, (*select.args, fill.args[1]), (*select.attrs, *fill.attrs))


def pinned_way(pins: frozenset[str], pair: Iterable[str], fused: Iterable[str]) -> str | None:
    """'fused' or 'pair' where the pinned kernels decide the pair's plan (the fused kernels pinned
    win), else None: the costs decide."""
    if pins.intersection(fused):
        return "fused"
    return "pair" if pins.intersection(pair) else None
