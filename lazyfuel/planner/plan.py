"""Choosing bindings for a chain given the chunks actually in hand, and inserting Contiguize.

`Planner.plan(chain, dtypes, layouts)` returns the cheapest `Program` over the allowed backends
(every step of one program on one backend, so it runs as one batch). For each op it tries the
bindings of that backend whose dtype key fits; an input whose layout breaks a binding's caps is
contiguized first when the binding `requires_contiguous` (the Contiguize step's cost is added and
its reason records the cap), and the binding is passed over when it claims `native_strided` but
still rejects the layout. So for a strided chunk "a strided-reading kernel" and "Contiguize + a
contiguous kernel" are both candidates, priced alike. Each Contiguize (inserted or an explicit
`contiguous()`) is itself a choice among the backend's Contiguize bindings whose caps accept the
view — on Vulkan one vkCmdCopyBuffer for a dense view, or the copy shader for any view — priced
the same way. Each decision is kept on the program
(`Program.choices`: the candidates, their costs, the winner and why) for `explain`. Plans are
cached by signature, so planning a chunk costs a dict lookup; the cache keeps the `cache_size`
plans used most recently (about 4 KB each), so a long-running process whose chunks keep changing
shape (index blocks of every length) does not grow without end.

Costs come from each binding's `cost_fn` (the shared priors of `lazyfuel.registry.cost`) unless the
planner is given a `CostModel` (the judge's measurements, `lazyfuel.judge.MeasuredCosts`): then a
step costs what the model says, the first step of a program also pays the model's per-program
overhead (a submit and its wait are paid once per program, not per step), and a candidate replaces
the incumbent only when it is cheaper by more than the measured noise of both, so ties go to the
earlier backend in `backends` and the earlier binding in the registry (the declared priority) and
plans stay stable run to run. The model also prices a program's transfers apart from its steps
(`CostModel.transfer_cost` per device link: one submit, the inputs in and the results out; zero for
a backend whose steps were timed by wall clock), counting only what moves given where the inputs
are and the result is wanted (`planner.placement`: a block resident on the device uploads nothing,
a resident block read on the host pays a download, a result kept on the device no download):
`Program.transfer_cost` is part of what the backend choice compares, and plays no part in choosing
among one backend's bindings, which move the same data.

A planner may be told which backends are left out and why (`left_out`: not usable here, or not
chosen); `left_out_for(ops)` names those that ship bindings for some of `ops` (what `explain`
lists), and with `mention_left_out` the first plan that needs such a backend's ops says once per
process, on one line, that it runs without it (`lazyfuel.notices.log_once`): the reader hears of
CUDA when an FFT is planned, not on every command.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from lazyfuel import notices
from lazyfuel.contracts.model import AwkwardLayoutStrategy, Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.ops import spec_for
from lazyfuel.ops.contiguize import ContiguizeParams
from lazyfuel.ops.views import VIEWS
from lazyfuel.planner.chain import Chain, OpNode
from lazyfuel.planner.choice import Candidate, Choice, cost_source, decide
from lazyfuel.planner.fusion import PairPlanning, fusable_pairs
from lazyfuel.planner.placement import Placement, link_bytes
from lazyfuel.planner.program import Program, Step
from lazyfuel.registry import Binding, NoBindingError, Registry
from lazyfuel.registry.cost import host_backend
from lazyfuel.settings import config


@dataclass(frozen=True)
class _Value:
    """A value during planning: its dtype, and its layout over the storage of program value `storage`."""

    dtype: DType
    layout: Layout
    storage: int


class CostModel(Protocol):
    """Costs the planner uses instead of each binding's `cost_fn` (implemented by the judge layer)."""

    def step_cost(self, binding: Binding, env: Mapping[str, Any]) -> float:
        """Seconds one more step of `binding` adds to a program, for the cost environment `env`."""
        ...

    def program_overhead(self, binding: Binding) -> float:
        """Seconds a program pays once when `binding` is its first step (submit, wait, transfers)."""
        ...

    def transfer_cost(self, backend: Backend, up: Sequence[int], down: Sequence[int]) -> float:
        """Seconds a program on `backend` pays besides its steps: a submit, inputs of `up` bytes in
        and results of `down` bytes out (0 where the steps' costs already include them)."""
        ...

    def noise(self, binding: Binding) -> float:
        """Relative spread of `binding`'s measured cost (0 when unmeasured): the width of a tie."""
        ...

    def measured(self, binding: Binding) -> bool:
        """Whether `binding`'s cost comes from a measurement (else from the shared priors)."""
        ...


PLAN_CACHE_SIZE = 4096  # plans kept per planner; older signatures are planned again when seen


class _Unplannable(Exception):
    """This backend cannot run the chain; the message says why."""


class Planner:
    """Plans chains against one registry and an ordered list of allowed backends (first = preferred)."""

    def __init__(self, registry: Registry, backends: Sequence[Backend],
                 costs: CostModel | None = None, cache_size: int = PLAN_CACHE_SIZE,
                 left_out: Mapping[Backend, str] | None = None, mention_left_out: bool = False,
                 device_kinds: Mapping[Backend, str] | None = None) -> None:
        self.registry = registry
        self.backends = tuple(backends)
        self.costs = costs
        # the kind of device each backend runs on (Vulkan's `DeviceInfo.kind`), for the bindings
        # whose contracts name the kinds they are planned on (`caps.device_kinds`); a backend not
        # here plans none of those unless they are pinned
        self.device_kinds = dict(device_kinds or {})
        self._kernel_names: tuple[int, frozenset[str]] = (-1, frozenset())  # (registry size, names)
        self.cache_size = cache_size
        self.left_out = dict(left_out or {})  # backend -> why it is not planned over
        self.mention_left_out = mention_left_out
        self._cache: OrderedDict[tuple[Any, ...], Program] = OrderedDict()  # least recently used first
        self._lock = threading.Lock()

    def plan(self, chain: Chain, dtypes: Sequence[DType], in_layouts: Sequence[Layout],
             placement: Placement | None = None) -> Program:
        """The cheapest program for `chain` on these inputs, where `placement` says they are and
        the result is wanted (None: host memory, `planner.placement`); NoBindingError if no
        backend can run it. Kernels pinned in `lazyfuel.config.pin_kernels` are taken wherever
        they can run (ValueError for a name no binding of the registry has)."""
        pins = self._pins()
        key = (chain, tuple(dtypes), tuple(in_layouts), len(self.registry), placement, pins)
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                return found
        if self.mention_left_out:
            self._mention_left_out(chain)
        programs: list[Program | None] = []
        candidates: list[Candidate] = []
        reasons: list[str] = []
        for backend in self.backends:
            try:
                program = _Builder(self.registry, backend, dtypes, in_layouts, self.costs,
                                   placement, self.device_kinds.get(backend), pins).build(chain)
            except _Unplannable as why:
                reasons.append(f"  {backend}: {why}")
                programs.append(None)
                candidates.append(Candidate(f"the whole chain on {backend}", math.nan, note=str(why)))
                continue
            programs.append(program)
            candidates.append(Candidate(f"the whole chain on {backend}", program.cost,
                                        _source(self.costs, [s.binding for s in program.steps]),
                                        transfer=program.transfer_cost))
        if all(p is None for p in programs):
            raise NoBindingError("no backend can run this chain:\n" + "\n".join(reasons), [])

        def cheaper(i: int, j: int) -> bool:
            a, b = programs[i], programs[j]
            return _cheaper(a.cost, b.cost, self.costs, [s.binding for s in (*a.steps, *b.steps)])

        choice = decide("backend", candidates, cheaper)
        chosen = programs[choice.chosen]
        best = dataclasses.replace(chosen, choices=(choice, *chosen.choices))
        with self._lock:
            self._cache[key] = best
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return best

    def _pins(self) -> frozenset[str]:
        """The pinned kernel names in force, each checked to name a kernel of the registry."""
        pins = frozenset(config.pin_kernels)
        if pins:
            size, known = self._kernel_names
            if size != len(self.registry):  # the registry grew: name its kernels again
                known = frozenset(b.contract.kernel for b in self.registry.bindings())
                self._kernel_names = (len(self.registry), known)
            unknown = sorted(pins - known)
            if unknown:
                raise ValueError(f"lazyfuel.config: pin_kernels names {', '.join(unknown)}, which no "
                                 f"binding has; kernels: {', '.join(sorted(known))}")
        return pins

    def host_copy_cost(self, dtype: DType, shape: Sequence[int]) -> float:
        """Seconds the host takes to copy an array of `dtype` and `shape` (what staging the rows a
        select touches costs): the Contiguize binding of the backend that runs in host memory
        (`registry.cost.host_backend`: numpy's copy), measured or prior, whether or not that backend
        is among this planner's."""
        host = host_backend()
        bindings = [b for b in self.registry.candidates(OpKind.Contiguize, (dtype, dtype))
                    if b.backend is host]
        if not bindings:
            return 0.0
        params = _contiguize_params(Layout.contiguous(tuple(shape)))
        return _cost(bindings[0], params, tuple(shape), self.costs)

    def left_out_for(self, ops: Iterable[str]) -> dict[Backend, str]:
        """The left-out backends (and why) that ship a binding for one of `ops` (op kind names)."""
        wanted = set(ops)
        shipping = {b.backend for b in self.registry.bindings() if b.op_kind.name in wanted}
        return {b: why for b, why in self.left_out.items() if b in shipping}

    def _mention_left_out(self, chain: Chain) -> None:
        """Say once per process, for each left-out backend with bindings for the chain's ops, that
        they are planned without it (and why)."""
        waiting = [b for b in self.left_out if not notices.given(left_out_notice(b))]
        if not waiting:
            return
        ops = [n.op for n in chain.nodes]
        for backend, why in self.left_out_for(ops).items():
            if backend in waiting:
                shipped = sorted({b.op_kind.name for b in self.registry.bindings()
                                  if b.backend is backend and b.op_kind.name in ops})
                notices.log_once(left_out_notice(backend), f"lazyfuel: {', '.join(shipped)} planned "
                                 f"without the {backend} backend, which is {why}")


def left_out_notice(backend: Backend) -> tuple[str, str]:
    """The key of the one notice per process that `backend` is left out (`lazyfuel.notices`)."""
    return ("left out", backend.name)


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
        candidates = [b for b in self.registry.bindings() if b.op_kind is op_kind
                      and b.backend is self.backend and b.dtypes[:-1] == in_dtypes]
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


def _source(costs: CostModel | None, bindings: Sequence[Binding]) -> str:
    """Where the costs of `bindings` come from (see `choice.cost_source`)."""
    return cost_source([costs is not None and costs.measured(b) for b in bindings])


def _contiguize_params(layout: Layout) -> ContiguizeParams:
    return ContiguizeParams.of_layout(layout)


def cost_env(binding: Binding, params: Mapping[str, Any], out_shape: Sequence[int]) -> dict[str, Any]:
    """The names a cost expression sees: the op params (bytes and strings left out), `dtype_bytes`, `n`."""
    env = dict(params, dtype_bytes=binding.dtypes[0].itemsize, n=math.prod(out_shape))
    return {k: v for k, v in env.items() if not isinstance(v, (bytes, str))}


def _cost(binding: Binding, params: Mapping[str, Any], out_shape: tuple[int, ...],
          costs: CostModel | None = None) -> float:
    env = cost_env(binding, params, out_shape)
    if costs is not None:
        return costs.step_cost(binding, env)
    return binding.cost_fn(env) if binding.cost_fn is not None else 0.0


def _cheaper(cost: float, than: float, costs: CostModel | None, bindings: Sequence[Binding]) -> bool:
    """`cost` beats `than`: strictly without a model; by more than the bindings' noise with one."""
    if costs is None:
        return cost < than
    noise = max((costs.noise(b) for b in bindings), default=0.0)
    return cost < than * (1.0 - noise)
