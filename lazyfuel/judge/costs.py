"""Measured costs for the planner: `MeasuredCosts` implements `lazyfuel.planner.plan.CostModel`.

It is built from the judge's cache for the bindings of a registry and the fingerprint of each
backend's device (`MeasuredCosts.load`), and handed to `Planner(registry, backends, costs=...)`:
no global state is involved, and two planners may plan with different measurements side by side.

For a measured binding a step costs `dispatch_s + bytes_moved * seconds_per_byte` (the dense view's
`dense_seconds_per_byte` for a Contiguize of a dense view, where the binding was also timed on
one: the copy shader) and the first
step of a program adds `latency_s - dispatch_s` (the submit and wait paid once per program), so a
one-step program costs exactly the fitted line `latency + bytes / bandwidth` (`cost_fn(binding)`).
A binding with no measurement is priced by the prior of its backend's device kind
(`DevicePrior`, registered by its backend package: a rate per byte of its `bytes_moved`; without
one, its shared cost function
`binding.cost_fn`, the priors of `lazyfuel.registry.cost`), and the first such lookup in the
process warns once, naming the binding and how to measure it. Ties are as wide as the measured
spread (at least `NOISE_FLOOR`).

A backend whose bindings were timed on the device's clock (`Judgement.clock == "kernel"`: Vulkan)
also has a transfer term (`judge.transfers`): `transfer_cost(backend, up, down)` prices one
submit and the upload / download of a program's host inputs and results, which the planner adds
to the program's steps. So the choice of backend counts the transfers, while choices among one
backend's bindings (same inputs, same results) compare kernel costs alone. Wall-clocked backends
(Cpu, the FFT providers) have no such term: their steps' times include whatever they move. A
backend whose transfers were not measured pays its device prior's link (`LinkPrior`: one submit,
the bytes in and out at the kind's rates), with one warning; with no prior, none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lazyfuel import notices
from lazyfuel.contracts.model import Backend
from lazyfuel.judge.cache import JudgeCache
from lazyfuel.judge.model import NOISE_FLOOR, Judgement, judgement_key
from lazyfuel.judge.transfers import TransferJudgement, transfer_key
from lazyfuel.layout import Layout
from lazyfuel.registry.cost import CostFn, DevicePrior, expression_cost
from lazyfuel.registry.model import Binding


class UnmeasuredCostWarning(UserWarning):
    """Planning used the shared cost priors because a binding has no judge measurement."""


_NOTICE = "unmeasured cost"  # the key of its one notice per process (`lazyfuel.notices`)


def _warn_once(missing: str, instead: str) -> None:
    """Warn about a missing measurement the first time one is met in this process (one line)."""
    notices.warn_once(_NOTICE, f"no judge measurement for {missing} on this device; planning "
                      f"with {instead} (run `lazyfuel judge --quick` to measure; this warning is shown "
                      "once per process)", UnmeasuredCostWarning)


def reset_warning() -> None:
    """Let the next missing measurement warn again (for tests)."""
    notices.forget(_NOTICE)


def _dense_view(env: Mapping[str, Any]) -> bool:
    """Whether a Contiguize step's params (`shape`, `strides`, `offset`) give a dense row-major view
    (at any start offset): the view the judge's dense line was timed on."""
    if "strides" not in env or "shape" not in env:
        return False
    view = Layout(tuple(env["shape"]), tuple(env["strides"]), int(env.get("offset", 0)))
    return not (view.is_strided or view.has_broadcast_stride0 or view.has_reverse_strides)


def _ident(binding: Binding) -> tuple[Any, ...]:
    return (binding.key, binding.symbol, binding.revision_hash)


class MeasuredCosts:
    """Judgements by binding (key, symbol and revision); see the module docstring."""

    def __init__(self, judgements: Mapping[Binding, Judgement] | None = None,
                 transfers: Mapping[Backend, TransferJudgement] | None = None,
                 priors: Mapping[Backend, DevicePrior] | None = None) -> None:
        self._by_binding: dict[tuple[Any, ...], Judgement] = {
            _ident(b): j for b, j in (judgements or {}).items()}
        self.transfers: dict[Backend, TransferJudgement] = dict(transfers or {})
        self.priors: dict[Backend, DevicePrior] = dict(priors or {})
        self._kernel_clocked = {b.backend for b, j in (judgements or {}).items() if j.clock == "kernel"}

    @classmethod
    def load(cls, bindings: Iterable[Binding], fingerprints: Mapping[Backend, str],
             cache: JudgeCache | None = None,
             transfer_modes: Mapping[Backend, str] | None = None,
             priors: Mapping[Backend, DevicePrior] | None = None) -> MeasuredCosts:
        """The cached judgements of `bindings` on the devices `fingerprints` (one per backend), and
        the transfer term of each backend in `transfer_modes` (its device's transfer mode);
        `priors` price what is not measured (`backends.catalog.device_prior` of each backend).

        Bindings of a backend with no fingerprint, or with no judgement of their current revision
        on that device, stay unmeasured.
        """
        cache = cache if cache is not None else JudgeCache()
        stored = cache.load()
        found = {}
        for b in bindings:
            fp = fingerprints.get(b.backend)
            hit = stored.get(judgement_key(b, fp)) if fp is not None else None
            if hit is not None:
                found[b] = hit
        moved = cache.load_transfers() if transfer_modes else {}
        transfers = {}
        for backend, mode in (transfer_modes or {}).items():
            fp = fingerprints.get(backend)
            hit = moved.get(transfer_key(backend, fp, mode)) if fp is not None else None
            if hit is not None:
                transfers[backend] = hit
        return cls(found, transfers, priors)

    def __len__(self) -> int:
        return len(self._by_binding)

    def judgement(self, binding: Binding) -> Judgement | None:
        """The measurement of `binding`'s current revision, or None."""
        return self._by_binding.get(_ident(binding))

    def step_cost(self, binding: Binding, env: Mapping[str, Any]) -> float:
        """Seconds one more step of `binding` adds to a program (see the module docstring)."""
        j = self.judgement(binding)
        if j is None:
            _warn_once(str(binding), f"the cost priors of {self._prior_name(binding.backend)}")
            return self._prior_fn(binding)(dict(env))
        per_byte = j.seconds_per_byte
        if j.dense_seconds_per_byte is not None and _dense_view(env):
            per_byte = j.dense_seconds_per_byte
        return j.dispatch_s + binding.contract.cost.bytes_moved.evaluate(env) * per_byte

    def program_overhead(self, binding: Binding) -> float:
        """Seconds paid once by a program whose first step is `binding` (0 when unmeasured)."""
        j = self.judgement(binding)
        return 0.0 if j is None else j.program_overhead_s

    def transfer_cost(self, backend: Backend, up: Sequence[int], down: Sequence[int]) -> float:
        """Seconds a program on `backend` pays besides its steps: one submit, inputs of `up` bytes
        and results of `down` bytes (0 for a backend whose steps were timed by wall clock)."""
        transfers = self.transfers.get(backend)
        if transfers is not None:
            return transfers.seconds(up, down)
        prior = self.priors.get(backend)
        if prior is not None and prior.link is not None:
            _warn_once(f"the transfers of {backend}", f"the link priors of {self._prior_name(backend)}")
            return prior.link.seconds(up, down)
        if backend in self._kernel_clocked:
            _warn_once(f"the transfers of {backend}", "its kernels' costs alone")
        return 0.0

    def pinned_upload_cost(self, backend: Backend, nbytes: int, submits: int = 1) -> float:
        """Seconds `nbytes` take up `backend`'s link from page-locked host memory in `submits`
        submits: the link prior's page-locked rate (the pool's probe where it ran), its pageable
        rate where none is known; 0 for a backend with no link."""
        prior = self.priors.get(backend)
        link = None if prior is None else prior.link
        if link is None:
            return 0.0
        return submits * link.submit_s + nbytes / (link.pinned_up_bytes_per_s or link.up_bytes_per_s)

    def host_read_cost(self, backend: Backend, nbytes: int, row_bytes: int, imported: int) -> float:
        """Seconds a kernel on `backend` takes to read `nbytes` of host memory in place, in rows of
        `row_bytes`, into its device memory, after importing `imported` bytes of it: one submit,
        the import at the link prior's import rate, then the slowest of the link's page-locked
        rate (the pageable one where none is known), its cost per row (`read_row_s`) and the
        kernel moving the bytes in and out at the device prior's kernel rate (lavapipe's kernels
        are the CPU's); 0 for a backend with no link."""
        prior = self.priors.get(backend)
        link = None if prior is None else prior.link
        if prior is None or link is None:
            return 0.0
        rate = link.pinned_up_bytes_per_s or link.up_bytes_per_s
        pin = imported / link.import_bytes_per_s if imported and link.import_bytes_per_s else 0.0
        rows = nbytes // max(row_bytes, 1)
        kernel = 2 * nbytes / max(prior.kernels.bytes_per_s, 1.0)
        return link.submit_s + pin + max(nbytes / max(rate, 1.0), rows * link.read_row_s, kernel)

    def _prior_name(self, backend: Backend) -> str:
        """The priors an unmeasured cost of `backend` comes from, in words."""
        prior = self.priors.get(backend)
        return f"{backend} on a {prior.kind} device" if prior is not None else f"{backend} (shared)"

    def _prior_fn(self, binding: Binding) -> CostFn:
        """The cost function of an unmeasured `binding`: its device prior's rates over its
        contract's cost expressions, else its shared `cost_fn` (0 without one)."""
        prior = self.priors.get(binding.backend)
        if prior is not None:
            return expression_cost(binding.contract, prior.kernels)
        return binding.cost_fn or (lambda env: 0.0)

    def noise(self, binding: Binding) -> float:
        """Relative width of a tie: the measured spread, at least NOISE_FLOOR (0 when unmeasured)."""
        j = self.judgement(binding)
        return 0.0 if j is None else max(j.spread, NOISE_FLOOR)

    def measured(self, binding: Binding) -> bool:
        """Whether `binding`'s current revision has a measurement here (else the priors price it)."""
        return self.judgement(binding) is not None

    def cost_fn(self, binding: Binding) -> CostFn:
        """The measured model of a one-step program, `latency + bytes_moved / bandwidth`, as a cost
        function (its device prior's when it is unmeasured)."""
        j = self.judgement(binding)
        if j is None:
            return self._prior_fn(binding)
        expr = binding.contract.cost.bytes_moved
        return lambda env: j.seconds(expr.evaluate(env))
