"""One backend's program for a chain: each op's candidate bindings enumerated and priced, the
Contiguize steps their caps need inserted, the cheapest kept (`Planner` compares the backends).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lazyfuel.contracts.model import AwkwardLayoutStrategy, Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.ops import spec_for
from lazyfuel.ops.contiguize import ContiguizeParams
from lazyfuel.ops.views import VIEWS
from lazyfuel.planner.chain import Chain, OpNode
from lazyfuel.planner.choice import Candidate, Choice, decide
from lazyfuel.planner.costing import CostModel, _cheaper, _cost, _source, cost_env
from lazyfuel.planner.fusion import PairPlanning, fusable_pairs
from lazyfuel.planner.placement import Placement, link_bytes
from lazyfuel.planner.program import Program, Step
from lazyfuel.registry import Binding, Registry


@dataclass(frozen=True)
class _Value:
    """A value during planning: its dtype, and its layout over the storage of program value `storage`."""

    dtype: DType
    layout: Layout
    storage: int


class _Unplannable(Exception):
    """This backend cannot run the chain; the message says why."""


class _Builder(PairPlanning):
    """Builds one backend's program for a chain, step by step."""

    def __init__(self, registry: Registry, backend: Backend, dtypes: Sequence[DType],
                 in_layouts: Sequence[Layout], costs: CostModel | None = None,
                 placement: Placement | None = None, device_kind: str | None = None,
                 pins: frozenset[str] = frozenset()) -> None:
        self.registry, self.backend, self.costs = registry, backend, costs
        self.placement = placement
        self.device_kind, self.pins = device_kind, pins
        self.n_inputs = len(dtypes)
        self.input_dtypes, self.input_layouts = tuple(dtypes), tuple(in_layouts)
        self.values = [_Value(d, lay, i) for i, (d, lay) in enumerate(zip(dtypes, in_layouts))]
        self.steps: list[Step] = []
        self.contiguous: dict[int, int] = {}  # chain value -> program value holding it contiguous
        self.choices: list[Choice] = []

    def build(self, chain: Chain) -> Program:
        pairs = fusable_pairs(chain)
        deferred = set(pairs.values())  # selects planned with the masked_fill reading them
        for j, node in enumerate(chain.nodes):
            if j in deferred:
                self.values.append(None)  # type: ignore[arg-type]  # nothing else reads it
            elif j in pairs:
                self.values.append(self._pair(chain.nodes[pairs[j]], node, self.n_inputs + pairs[j]))
            else:
                self.values.append(self._node(node))
        outputs = tuple(self._as_program_value(v, "the result is returned contiguous")
                        for v in chain.outputs)
        program = Program(self.input_dtypes, self.input_layouts, tuple(self.steps), outputs,
                          tuple(self.choices))
        if not self.steps:
            return program
        moves = link_bytes(self.backend, *program.transfer_bytes(), self.placement)
        links = tuple((b, tuple(up), tuple(down)) for b, (up, down) in moves.items())
        transfer = 0.0 if self.costs is None else sum(
            self.costs.transfer_cost(b, up, down) for b, (up, down) in moves.items())
        return dataclasses.replace(program, transfer_cost=transfer, links=links)

    def _node(self, node: OpNode) -> _Value:
        view = VIEWS.get(node.op)
        if view is not None:
            src = self.values[node.args[0]]
            return _Value(src.dtype, view.layout(src.layout, node.attr), src.storage)
        op_kind = OpKind.parse(node.op)
        if op_kind is OpKind.Contiguize:
            pid = self._contiguize(node.args[0], "explicit contiguous()", force=True)
            return self._step_value(pid)
        return self._select(op_kind, node)

    def _try_select(self, op_kind: OpKind, node: OpNode) -> _Value | None:
        """`_select`, or None where no binding of this backend can run `node`."""
        try:
            return self._select(op_kind, node)
        except _Unplannable:
            return None

    def _cheaper_of(self, cost: float, than: float, bindings: Sequence[Binding]) -> bool:
        return _cheaper(cost, than, self.costs, bindings)

    def _source_of(self, bindings: Sequence[Binding]) -> str:
        return _source(self.costs, bindings)

    def _step_value(self, pid: int) -> _Value:
        step = self.steps[pid - self.n_inputs]
        return _Value(step.out_dtype, Layout.contiguous(step.out_shape), pid)

    def _select(self, op_kind: OpKind, node: OpNode, number: int | None = None) -> _Value:
        """Plan `node` (chain node `number`, default the next) with its cheapest binding."""
        args = [self.values[a] for a in node.args]
        in_dtypes = tuple(a.dtype for a in args)  # the output dtype is the binding's (its dtype rule)
        candidates = [b for b in self.registry.of_kind(op_kind)
                      if b.backend is self.backend and b.dtypes[:-1] == in_dtypes]
        params, out_shape = spec_for(op_kind).params([a.layout.shape for a in args], args[0].dtype, node.attr)
        candidates = [b for b in candidates if self._may_plan(b, params, out_shape)]
        if any(b.contract.kernel in self.pins for b in candidates):
            candidates = [b for b in candidates if b.contract.kernel in self.pins]
        if not candidates:
            raise _Unplannable(f"no {op_kind} binding for inputs [{','.join(d.name for d in in_dtypes)}]")
        options: list[tuple[Binding, dict[int, str], list[Binding]]] = []
        priced: list[Candidate] = []
        for binding in candidates:  # registry order: the declared priority
            needs = self._layout_needs(binding, node.args)
            if needs is None:
                continue
            cost, used = self._candidate_cost(binding, params, out_shape, needs, node.args)
            options.append((binding, dict(needs), used))
            plan = _describe(binding, needs, node.args, self.n_inputs)
            priced.append(Candidate(plan, cost, _source(self.costs, used)))
        if not options:
            raise _Unplannable(f"every {op_kind} binding rejects the input layouts")

        def cheaper(i: int, j: int) -> bool:
            return _cheaper(priced[i].cost, priced[j].cost, self.costs, [*options[i][2], *options[j][2]])

        number = len(self.values) - self.n_inputs if number is None else number
        choice = decide(f"{op_kind} (chain node {number})", priced, cheaper)
        self.choices.append(choice)
        binding, reasons, _ = options[choice.chosen]
        pids = []
        for i, (spec, a) in enumerate(zip(binding.contract.inputs, node.args)):
            why = reasons.get(i)
            if why is None:
                pids.append(self.values[a].storage)
            else:
                pids.append(self._contiguize(a, f"{binding.contract.kernel} input {spec.name}: {why}"))
        step = Step(binding, tuple(pids), tuple(params.items()), out_shape, binding.dtypes[-1],
                    _cost(binding, params, out_shape, self.costs) + self._overhead(binding))
        self.steps.append(step)
        return self._step_value(self.n_inputs + len(self.steps) - 1)

    def _may_plan(self, binding: Binding, params: Mapping[str, Any], out_shape: tuple[int, ...]) -> bool:
        """Whether the contract's plan conditions hold: its `misfit` is 0 for these params, and the
        device is of a kind it lists (`device_kinds`; a pinned kernel runs on any device)."""
        caps = binding.contract.caps
        if caps.misfit is not None and caps.misfit.evaluate(cost_env(binding, params, out_shape)) != 0:
            return False
        return not caps.device_kinds or self.device_kind in caps.device_kinds \
            or binding.contract.kernel in self.pins

    def _candidate_cost(self, binding: Binding, params: Mapping[str, Any], out_shape: tuple[int, ...],
                        needs: list[tuple[int, str]], args: tuple[int, ...]) -> tuple[float, list[Binding]]:
        """Seconds `binding` adds with the Contiguize steps it needs first (none for a value already
        contiguized), and the bindings priced; the program's overhead when it would start it."""
        fresh = [args[i] for i, _ in needs if args[i] not in self.contiguous]
        firsts = [self._contiguize_choice(a)[0] for a in fresh]
        cost = _cost(binding, params, out_shape, self.costs) + sum(self._contiguize_cost(a) for a in fresh)
        return cost + self._overhead((*firsts, binding)[0]), [*firsts, binding]

    def _overhead(self, binding: Binding) -> float:
        """The model's per-program overhead, paid by a program's first step only."""
        return self.costs.program_overhead(binding) if self.costs is not None and not self.steps else 0.0

    def _layout_needs(self, binding: Binding, args: tuple[int, ...]) -> list[tuple[int, str]] | None:
        """Which args must be contiguized for `binding` (index, reason), or None if it cannot run."""
        needs = []
        for i, (spec, a) in enumerate(zip(binding.contract.inputs, args)):
            v = self.values[a]
            if spec.rank is not None and v.layout.ndim != spec.rank:
                return None
            derived = a >= self.n_inputs and v.layout != self._storage_layout(v)
            violation = spec.layout.violation(v.layout) if not derived else "a view of an intermediate"
            if violation is None:
                continue
            if binding.contract.caps.awkward_layout_strategy is AwkwardLayoutStrategy.requires_contiguous \
                    or derived:
                needs.append((i, violation))
            else:
                return None
        return needs

    def _storage_layout(self, v: _Value) -> Layout:
        if v.storage < self.n_inputs:
            return self.input_layouts[v.storage]
        return Layout.contiguous(self.steps[v.storage - self.n_inputs].out_shape)

    def _as_program_value(self, chain_value: int, reason: str) -> int:
        v = self.values[chain_value]
        if v.storage >= self.n_inputs and v.layout == self._storage_layout(v):
            return v.storage
        return self._contiguize(chain_value, reason)

    def _contiguize_choice(self, chain_value: int, reason: str = "") -> tuple[Binding, Choice]:
        """The cheapest Contiguize binding of this backend whose caps accept the value's layout
        (e.g. one vkCmdCopyBuffer for a dense view, a copy shader for any view), ties to the one
        declared first, and the decision for `explain` (`reason`: why the copy is made)."""
        v = self.values[chain_value]
        options = [b for b in self.registry.candidates(OpKind.Contiguize, (v.dtype, v.dtype))
                   if b.backend is self.backend]
        refused = [b.contract.inputs[0].layout.violation(v.layout) for b in options]
        if all(refused):
            raise _Unplannable(f"no Contiguize binding for {v.dtype} accepting layout {v.layout}")
        params = _contiguize_params(v.layout)
        priced = [Candidate(f"{b.contract.kernel} [{b.kernel_source}]", math.nan, note=why) if why else
                  Candidate(f"{b.contract.kernel} [{b.kernel_source}]",
                            _cost(b, params, v.layout.shape, self.costs) + self._overhead(b),
                            _source(self.costs, [b])) for b, why in zip(options, refused)]

        def cheaper(i: int, j: int) -> bool:
            return _cheaper(priced[i].cost, priced[j].cost, self.costs, [options[i], options[j]])

        n_in = self.n_inputs
        name = f"in{chain_value}" if chain_value < n_in else f"chain node {chain_value - n_in}"
        choice = decide(f"Contiguize of {name}" + (f" ({reason})" if reason else ""), priced, cheaper)
        return options[choice.chosen], choice

    def _contiguize_cost(self, chain_value: int) -> float:
        """The step cost of the Contiguize binding `_contiguize` would choose (no program overhead)."""
        v = self.values[chain_value]
        binding, _ = self._contiguize_choice(chain_value)
        return _cost(binding, _contiguize_params(v.layout), v.layout.shape, self.costs)

    def _contiguize(self, chain_value: int, reason: str, force: bool = False) -> int:
        if not force and chain_value in self.contiguous:
            return self.contiguous[chain_value]
        v = self.values[chain_value]
        binding, choice = self._contiguize_choice(chain_value, reason)
        self.choices.append(choice)
        params = _contiguize_params(v.layout)
        cost = _cost(binding, params, v.layout.shape, self.costs) + self._overhead(binding)
        self.steps.append(Step(binding, (v.storage,), tuple(params.items()), v.layout.shape, v.dtype,
                               cost, reason))
        pid = self.n_inputs + len(self.steps) - 1
        self.contiguous[chain_value] = pid
        return pid


def _describe(binding: Binding, needs: list[tuple[int, str]], args: tuple[int, ...], n_inputs: int) -> str:
    """A candidate plan in words: the Contiguize steps first (with the cap each answers), then the
    kernel. A program input is named `in<i>`, another value by the kernel input it feeds."""
    kernel = f"{binding.contract.kernel} [{binding.kernel_source}]"
    if not needs:
        return f"{kernel} reading its inputs as they are"
    names = {i: f"in{args[i]}" if args[i] < n_inputs else binding.contract.inputs[i].name for i, _ in needs}
    firsts = " + ".join(f"Contiguize({names[i]}) (inserted: {binding.contract.kernel} input "
                        f"{binding.contract.inputs[i].name}: {why})" for i, why in needs)
    return f"{firsts} + {kernel}"


def _contiguize_params(layout: Layout) -> ContiguizeParams:
    return ContiguizeParams.of_layout(layout)
