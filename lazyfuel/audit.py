"""The audit: every binding against the CPU reference, within the precision its contract declares.

For each binding of a registry, on fresh random data (see `lazyfuel.judge.workloads`: NaN payloads,
-0.0, subnormals and infinities in the select family's float inputs; finite data for the FFTs,
which mix every element of a row), `audit()` runs one-step Programs through the binding's backend
executor over its op kind's cases (`OpSpec.cases`, and `view_cases` where the binding's caps accept
the view: see `lazyfuel.ops`; select family: ranks 1-3, odd extents, every dim; FFTs:
power-of-two, composite and prime lengths, 1-D and batched along the last axis and axis 0, norms
backward / ortho / forward, cropped and zero-padded `n`; both: transposed, reversed, offset and
broadcast sources; a binding whose `mask` input accepts a broadcast view: each case again with the
mask a broadcast of its first column, of its first row and of one element), and compares each
result with the op's full-semantics numpy reference
(`OpSpec.reference`; the FFTs' in double precision) by the op's comparison (`OpSpec.compare`):

- select family and Contiguize, element by element: `max_ulp`, `max_relative`, `max_absolute` (all
  0: the bits must be equal);
- FFTs, normwise per transformed row (decision 8): `max|got - want| <= max_relative * max|want|`
  over each row along the axis;
- determinism `bitwise`: the same bits when run again, and when the work is split into pieces
  (fewer indices, fewer rows, smaller batches) and the pieces are put back together;
  `run_to_run`: the same bits when run again; `none`: not checked.

A binding fails on its first broken promise; the report names the binding, the case, the check, the
offending element (the first one; for an FFT, the worst element of the worst row) and both values
with their bits. Nothing is mocked: kernels run on the real devices. `lazyfuel audit` prints
`AuditReport.table()` and exits 1 on any failure.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lazyfuel.backends.base import executor
from lazyfuel.contracts.model import AwkwardLayoutStrategy, Backend, Determinism
from lazyfuel.judge.workloads import make_inputs, program_for, supported
from lazyfuel.layout import Layout
from lazyfuel.ops import Case, spec_for
from lazyfuel.precision import Mismatch, first_bit_difference
from lazyfuel.providers import available_backends, default_registry, left_out
from lazyfuel.registry import Binding, Registry

Inputs = list[np.ndarray]
Attrs = dict[str, Any]


# a mask seen as a broadcast of a smaller one (`Case.view` names them; they apply to the input named
# "mask"): of its first element along the last axis (a row mask), along the first (a column mask)
# and of one element
MASK_VIEWS = ("mask-row", "mask-column", "mask-one")


def _mask_view(name: str, m: np.ndarray) -> np.ndarray:
    """`m` as a broadcast view of a dense copy of the slice `name` says (see `MASK_VIEWS`)."""
    if m.ndim == 0:
        return m
    one = m.reshape(-1)[:1].reshape((1,) * m.ndim)
    small = {"mask-row": m[..., :1], "mask-column": m[:1], "mask-one": one}[name]
    return np.broadcast_to(np.ascontiguousarray(small), m.shape)


def _view(name: str, a: np.ndarray) -> np.ndarray:
    """`a`'s values seen through an awkward view (a fresh buffer laid out for it)."""
    every = tuple(slice(None, None, -1) for _ in a.shape)
    if name == "transposed":
        return np.ascontiguousarray(a.T).T
    if name == "reversed":
        return np.ascontiguousarray(a[every])[every]
    if name == "offset-strided":  # every other row; the rows between are all-ones bits (NaN for floats)
        buf = np.empty((2 * a.shape[0] + 1, *a.shape[1:]), a.dtype)
        buf.reshape(-1).view(np.uint8)[:] = 0xFF
        buf[1::2] = a
        return buf[1::2]
    if name == "broadcast":
        return np.broadcast_to(a[:1], a.shape)
    return a


@dataclass(frozen=True)
class Failure:
    """How a binding broke its contract: the check, the case, and the first offending element."""

    check: str
    case: str
    mismatch: Mismatch | None = None
    error: str = ""

    def __str__(self) -> str:
        what = str(self.mismatch) if self.mismatch is not None else self.error
        return f"{self.check} [{self.case}]: {what}"


@dataclass(frozen=True)
class BindingAudit:
    """One binding's verdict: cases run, and its first failure (None: it keeps its contract)."""

    binding: Binding
    cases: int
    failure: Failure | None = None
    skipped: str = ""

    @property
    def ok(self) -> bool:
        return self.failure is None


@dataclass
class AuditReport:
    """Every binding's verdict; `ok` when none failed. `seed` reproduces the data."""

    seed: int
    results: list[BindingAudit] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    @property
    def failures(self) -> list[BindingAudit]:
        return [r for r in self.results if not r.ok]

    def table(self) -> str:
        """One row per binding, the skipped ones with the reason, each failure in full, then the
        verdict."""
        rows = [("result", "op_kind", "dtype key", "backend", "kernel_source", "symbol", "cases",
                 "determinism")]
        for r in self.results:
            b = r.binding
            status = "skip" if r.skipped else ("ok" if r.ok else "FAIL")
            rows.append((status, b.op_kind.name, "[" + ",".join(d.name for d in b.dtypes) + "]",
                         b.backend.name, b.kernel_source, b.symbol, str(r.cases),
                         b.contract.determinism.name))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
        audited = [r for r in self.results if not r.skipped]
        lines += [f"skip {r.binding}: {r.skipped}" for r in self.results if r.skipped]
        lines += [f"FAIL {r.binding} ({r.binding.symbol}): {r.failure}" for r in self.failures]
        # the verdict last, so that `lazyfuel audit | tail` (make test) shows it
        lines.append(f"{len(audited) - len(self.failures)} of {len(audited)} binding(s) keep their "
                     f"contract ({len(self.results) - len(audited)} skipped; seed {self.seed})")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


class _Auditor:
    """Audits one binding with one runner and one random generator."""

    def __init__(self, binding: Binding, runner: Any, rng: np.random.Generator, pieces: int) -> None:
        self.binding, self.runner, self.rng, self.pieces = binding, runner, rng, pieces

    def cases(self) -> list[Case]:
        b = self.binding
        native = b.contract.caps.awkward_layout_strategy is AwkwardLayoutStrategy.native_strided
        spec = spec_for(b.op_kind)
        plain, views = spec.cases, spec.view_cases
        masks = [dataclasses.replace(c, view=v) for v in MASK_VIEWS for c in plain if self._mask_views()]
        return list(plain) + ([c for c in views if self._accepts(c)] if native else []) + masks

    def _mask_views(self) -> bool:
        """Whether the binding has a `mask` input whose caps accept a broadcast view."""
        probe = Layout.of(np.broadcast_to(np.zeros((2, 1), np.bool_), (2, 2)))
        return any(spec.name == "mask" and spec.layout.violation(probe) is None
                   for spec in self.binding.contract.inputs)

    def _accepts(self, case: Case) -> bool:
        probe = _view(case.view, np.zeros(case.shape, np.uint8))
        return self.binding.contract.inputs[0].layout.violation(Layout.of(probe)) is None

    def run(self, inputs: Inputs, attrs: Attrs) -> np.ndarray:
        workload = program_for(self.binding, inputs, attrs)
        (out,) = self.runner.run(workload.program, list(workload.inputs))
        return out

    def check(self, case: Case) -> Failure | None:
        b = self.binding
        inputs, attrs = make_inputs(b, case.shape, case.dim, self.rng, case.n_indices, dict(case.attrs))
        if case.view in MASK_VIEWS:
            at = [spec.name for spec in b.contract.inputs].index("mask")
            inputs[at] = _mask_view(case.view, inputs[at])
        else:
            inputs[0] = _view(case.view, inputs[0])
        spec = spec_for(b.op_kind)
        expected = spec.reference(inputs, attrs)
        try:
            got = self.run(inputs, attrs)
            bad = spec.compare(got, expected, b.dtypes[-1], b.contract, attrs)
        except Exception as err:  # any error breaks the contract; the report says which
            return Failure("runs", str(case), error=f"{type(err).__name__}: {err}")
        if bad is not None:
            return Failure("precision", str(case), bad)
        return self._determinism(case, inputs, attrs, got)

    def _determinism(self, case: Case, inputs: Inputs, attrs: Attrs, first: np.ndarray) -> Failure | None:
        determinism = self.binding.contract.determinism
        if determinism is Determinism.none:
            return None
        again = first_bit_difference(self.run(inputs, attrs), first, "bits differ from the first run")
        if again is not None:
            return Failure(f"determinism {determinism.name}: repeat", str(case), again)
        if determinism is not Determinism.bitwise:
            return None
        parts, axis = spec_for(self.binding.op_kind).chunking(inputs, attrs, self.pieces)
        if len(parts) < 2:
            return None
        joined = np.concatenate([self.run(i, a) for i, a in parts], axis=axis)
        split = first_bit_difference(joined, first, f"bits differ when run in {len(parts)} pieces "
                                     f"joined along axis {axis}")
        return None if split is None else Failure("determinism bitwise: chunking", str(case), split)


def audit_binding(binding: Binding, runner: Any, rng: np.random.Generator, pieces: int = 3) -> BindingAudit:
    """Audit one binding through `runner` (its backend's executor); see the module docstring."""
    if not supported(binding):
        return BindingAudit(binding, 0, skipped=f"no audit cases for op kind {binding.op_kind}")
    auditor = _Auditor(binding, runner, rng, pieces)
    cases = auditor.cases()
    for number, case in enumerate(cases, 1):
        failure = auditor.check(case)
        if failure is not None:
            return BindingAudit(binding, number, failure)
    return BindingAudit(binding, len(cases))


def audit(registry: Registry | None = None, backends: Sequence[Backend] | None = None, *,
          seed: int | None = None, select: Callable[[Binding], bool] | None = None,
          progress: Any = None) -> AuditReport:
    """Audit the bindings of `registry` (default: the default registry) that `select` keeps, on
    `backends` (default: every backend; those not usable here are reported as skipped). Runs
    kernels now; returns the report (never raises for a broken binding). `seed` (default: fresh)
    reproduces the random data."""
    registry = registry if registry is not None else default_registry()
    usable = list(backends) if backends is not None else available_backends()
    left = left_out() if backends is None else {}  # why each other backend is skipped
    seed = secrets.randbits(32) if seed is None else seed
    report = AuditReport(seed)
    chosen = [b for b in registry.bindings() if (select is None or select(b))
              and (backends is None or b.backend in usable)]
    if progress is not None:
        progress.start(len(chosen), f"auditing {len(chosen)} binding(s)")
    for number, b in enumerate(chosen):
        if progress is not None:
            progress.label(str(b))
        if b.backend not in usable:
            report.results.append(BindingAudit(b, 0, skipped=f"backend {b.backend} is "
                                               f"{left.get(b.backend, 'not usable here')}"))
        else:
            rng = np.random.default_rng([seed, number])
            report.results.append(audit_binding(b, executor(b.backend), rng))
        if progress is not None:
            progress.advance()
    if progress is not None:
        progress.finish()
    return report
