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
from typing import Any

from lazyfuel import notices
from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.planner.builder import _Builder, _contiguize_params, _Unplannable
from lazyfuel.planner.chain import Chain
from lazyfuel.planner.choice import Candidate, decide
from lazyfuel.planner.costing import (
    CostModel,
    _cheaper,
    _cost,
    _source,
    cost_env,  # noqa: F401 (re-exported)
)
from lazyfuel.planner.placement import Placement
from lazyfuel.planner.program import Program
from lazyfuel.registry import NoBindingError, Registry
from lazyfuel.registry.cost import host_backend
from lazyfuel.settings import config

PLAN_CACHE_SIZE = 4096  # plans kept per planner; older signatures are planned again when seen


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
        if placement is not None and placement.all_host:
            placement = None  # the same program as no placement: one cache entry, planned once
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

    def pinned_upload_cost(self, backend: Backend, nbytes: int, submits: int = 1) -> float:
        """Seconds `nbytes` of page-locked host memory take up to `backend`'s device in `submits`
        submits (the cost model's `pinned_upload_cost`; its pageable `transfer_cost` where it has
        none; 0 without a cost model)."""
        if self.costs is None:
            return 0.0
        priced = getattr(self.costs, "pinned_upload_cost", None)
        if priced is not None:
            return priced(backend, nbytes, submits)
        more = max(submits - 1, 0) * self.costs.transfer_cost(backend, [], [])
        return self.costs.transfer_cost(backend, [nbytes], []) + more

    def host_read_cost(self, backend: Backend, nbytes: int, row_bytes: int, imported: int = 0) -> float:
        """Seconds a kernel on `backend` takes to read `nbytes` of host memory where it lies, in rows
        of `row_bytes`, after importing `imported` bytes of it (the cost model's `host_read_cost`;
        else as a page-locked upload; 0 without a cost model)."""
        if self.costs is None:
            return 0.0
        priced = getattr(self.costs, "host_read_cost", None)
        if priced is not None:
            return priced(backend, nbytes, row_bytes, imported)
        return self.pinned_upload_cost(backend, nbytes)

    def left_out_for(self, ops: Iterable[str]) -> dict[Backend, str]:
        """The left-out backends (and why) that ship a binding for one of `ops` (op kind names)."""
        shipping = {b.backend for op in set(ops) for b in self.registry.of_kind(op)}
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
                shipped = sorted({op for op in ops
                                  if any(b.backend is backend for b in self.registry.of_kind(op))})
                notices.log_once(left_out_notice(backend), f"lazyfuel: {', '.join(shipped)} planned "
                                 f"without the {backend} backend, which is {why}")


def left_out_notice(backend: Backend) -> tuple[str, str]:
    """The key of the one notice per process that `backend` is left out (`lazyfuel.notices`)."""
    return ("left out", backend.name)
