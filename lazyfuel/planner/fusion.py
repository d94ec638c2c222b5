"""Planned fusions: an index_select whose only reader is a masked_fill may run as one SelectFill.

The planner (`builder._Builder`, through `PairPlanning`) plans such a pair both ways and keeps the
cheaper: the two steps (an
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

import dataclasses
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from lazyfuel.contracts.model import OpKind
from lazyfuel.planner.chain import Chain, OpNode
from lazyfuel.planner.choice import Candidate, Choice, decide
from lazyfuel.planner.program import Step
from lazyfuel.registry.model import Binding

Way = tuple[list[Step], list[Choice], dict[int, int]]  # steps, choices, contiguized values


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


class PairPlanning:
    """How the planner's builder (`builder._Builder`, which mixes this in) plans a fusable pair. It
    relies on the builder's `steps`, `choices`, `contiguous` (chain value -> its contiguous
    program value), `values`, `n_inputs`, `pins`, `costs`, and on `_select`, `_try_select`,
    `_cheaper_of` and `_source_of`."""

    steps: list[Step]
    choices: list[Choice]
    contiguous: dict[int, int]
    values: list[Any]
    n_inputs: int
    pins: frozenset[str]
    costs: Any

    def _select(self, op_kind: OpKind, node: OpNode, number: int | None = None) -> Any: ...
    def _try_select(self, op_kind: OpKind, node: OpNode) -> Any: ...
    def _cheaper_of(self, cost: float, than: float, bindings: Sequence[Binding]) -> bool: ...
    def _source_of(self, bindings: Sequence[Binding]) -> str: ...

    def _pair(self, select: OpNode, fill: OpNode, select_value: int) -> Any:
        """An index_select and the masked_fill of its result, planned as the two steps and as one
        SelectFill; the way chosen is kept (its steps, its choices and this decision)."""
        mark = (len(self.steps), len(self.choices), dict(self.contiguous))
        self.values[select_value] = self._select(OpKind.IndexSelect, select, select_value - self.n_inputs)
        value = self._select(OpKind.MaskedFill, fill)
        pair: Way = (self.steps[mark[0]:], self.choices[mark[1]:], dict(self.contiguous))
        self._rewind(mark)
        fused = self._try_select(OpKind.SelectFill, fused_node(select, fill))  # None: no binding here
        ways = [pair, (self.steps[mark[0]:], self.choices[mark[1]:], dict(self.contiguous))]
        self._rewind(mark)
        won = 0 if fused is None else self._fuse_or_not(ways, select_value)
        steps, choices, self.contiguous = ways[won]
        self.steps, self.choices = [*self.steps, *steps], [*self.choices, *choices]
        if won:
            self.values[select_value] = None  # never made
        return (value, fused)[won]

    def _fuse_or_not(self, ways: list[Way], select_value: int) -> int:
        """0 to keep the pair's steps, 1 for the fused step: pinned kernels first, then the costs
        (an unmeasured fused kernel against a measured pair: its contract's word); the decision,
        with both plans, is appended to the chosen way's choices."""
        names = [[s.binding.contract.kernel for s in w[0]] for w in ways]
        priced = [Candidate(" + ".join(f"{s.binding.contract.kernel} [{s.binding.kernel_source}]"
                                       for s in steps), sum(s.cost for s in steps),
                            self._source_of([s.binding for s in steps])) for steps, _, _ in ways]
        pinned = pinned_way(self.pins, names[0], names[1])
        if pinned is not None:
            other = 0 if pinned == "fused" else 1
            why = "the fused kernel is pinned" if pinned == "fused" else "a kernel of the pair is pinned"
            priced[other] = dataclasses.replace(priced[other], cost=math.nan, note=f"not taken: {why}")

        def cheaper(i: int, j: int) -> bool:
            return self._cheaper_of(priced[i].cost, priced[j].cost,
                                    [s.binding for s in (*ways[i][0], *ways[j][0])])

        n_in = self.n_inputs
        what = f"index_select + masked_fill (chain nodes {select_value - n_in}, {len(self.values) - n_in})"
        fused = ways[1][0][-1].binding
        if pinned is None and self.costs is not None and not self.costs.measured(fused) \
                and priced[0].source != "prior":
            # the pair measured, the fused kernel not yet (a judge cache from before it): its
            # device prior is no match for measured steps, so its contract's word decides
            choice = Choice(what, tuple(priced), 1, "the fused kernel is not measured yet: taken where "
                            "its contract allows (`lazyfuel judge` measures it)")
        else:
            choice = decide(what, priced, cheaper)
        ways[choice.chosen][1].append(choice)
        return choice.chosen

    def _rewind(self, mark: tuple[int, int, dict[int, int]]) -> None:
        """Drop the steps and choices made since `mark` (and the Contiguize steps they recorded)."""
        steps, choices, contiguous = mark
        self.steps, self.choices = self.steps[:steps], self.choices[:choices]
        self.contiguous = dict(contiguous)
