"""The audit: every binding against the CPU reference, within the precision its contract declares.

For each binding of a registry, on fresh random data (see `lazyfuel.judge.workloads`: NaN payloads,
-0.0, subnormals and infinities in the select family's float inputs; finite data for the FFTs,
which mix every element of a row), `audit()` runs one-step Programs through the binding's backend
executor over its op kind's row of `CASES` (select family: ranks 1-3, odd extents, every dim;
FFTs: power-of-two, composite and prime lengths, 1-D and batched along the last axis and axis 0,
norms backward / ortho / forward, cropped and zero-padded `n`; both: transposed, reversed, offset
and broadcast sources where the binding's caps accept them), and compares each result with the
full-semantics reference functions of `lazyfuel.backends.cpu.kernels` and `.fft` (the latter in
double precision) by the op kind's row of `COMPARE`:

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

import itertools
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lazyfuel.backends.base import executor
from lazyfuel.backends.cpu import fft as fft_reference
from lazyfuel.backends.cpu import kernels as reference
from lazyfuel.contracts.model import AwkwardLayoutStrategy, Backend, Determinism, OpKind
from lazyfuel.judge.workloads import FFT_POINTS_IN, make_inputs, program_for, supported
from lazyfuel.layout import Layout, normalize_dim
from lazyfuel.precision import Mismatch, first_bit_difference, first_mismatch, worst_row_mismatch
from lazyfuel.providers import available_backends, default_registry, left_out
from lazyfuel.registry import Binding, Registry

Inputs = list[np.ndarray]
Attrs = dict[str, Any]


@dataclass(frozen=True)
class Case:
    """Data of `shape`, selecting (or transforming) along `dim` with `n_indices` indices and the op
    attributes `attrs` (an FFT's `norm`, `n`), the source seen through `view`."""

    shape: tuple[int, ...]
    dim: int = 0
    n_indices: int | None = None
    view: str = "contiguous"
    attrs: tuple[tuple[str, Any], ...] = ()

    def __str__(self) -> str:
        idx = "" if self.n_indices is None else f", {self.n_indices} indices"
        extra = "".join(f", {k} {v}" for k, v in self.attrs)
        return f"shape {self.shape}, dim {self.dim}{idx}{extra}, {self.view} source"


SELECT_CASES = (Case((97,), 0, 41), Case((37, 13), 0, 50), Case((37, 13), 1, 7), Case((5, 6, 7), 1, 9),
                Case((5, 6, 7), 2, 3), Case((3, 4, 5), 0, 1), Case((64, 33), 1, 64), Case((1,), 0, 3))
SELECT_VIEW_CASES = (Case((12, 9), 1, 5, "transposed"), Case((11, 7), 0, 6, "reversed"),
                     Case((10, 6), 0, 4, "offset-strided"), Case((8, 5), 1, 3, "broadcast"))
# select_fill runs rows of whole 16-byte words (its `misfit`): inner extents of 16 and 32 elements
SELECT_FILL_CASES = (Case((37, 16), 0, 50), Case((5, 6, 16), 1, 9), Case((3, 4, 32), 0, 1),
                     Case((2, 3, 16), 1, 7), Case((1, 48), 0, 3), Case((64, 32), 0, 64),
                     Case((7, 2, 2, 16), 1, 5), Case((16, 64), 0, 20))


def _fft_case(shape: tuple[int, ...], dim: int, norm: str, view: str = "contiguous",
              n: int | None = None) -> Case:
    """An FFT case: `shape[dim]` is the signal length (see `make_inputs`), `n` crops or pads it."""
    return Case(shape, dim, None, view, (("norm", norm), *((("n", n),) if n is not None else ())))


# Lengths: each of VkFFT's paths: radix kernels (a power of two; composites 12 and 1000), Rader's
# algorithm (primes p with a smooth p - 1: 17, 1009), Bluestein's (47: 46 = 2 * 23); 1-D, batched
# along the last axis and along axis 0; every norm. Each VkFFT plan (batch, length, precision,
# norm) compiles once per direction, seconds on PoCL the first time: the `n` and view cases reuse
# the plans of the plain ones.
FFT_CASES = (_fft_case((16,), 0, "backward"), _fft_case((3, 12), 1, "ortho"),
             _fft_case((17, 2), 0, "forward"), _fft_case((47,), 0, "ortho"),
             _fft_case((2, 1000), 1, "forward"), _fft_case((1009, 2), 0, "backward"),
             _fft_case((3, 10), 1, "ortho", n=12), _fft_case((20,), 0, "backward", n=16))
FFT_VIEW_CASES = (_fft_case((3, 12), 1, "ortho", "transposed"), _fft_case((16,), 0, "backward", "reversed"),
                  _fft_case((17, 2), 0, "forward", "offset-strided"),
                  _fft_case((2, 1000), 1, "forward", "broadcast"))

# op kind -> (cases every binding runs, view cases run where the binding's caps accept the view)
CASES: dict[OpKind, tuple[tuple[Case, ...], tuple[Case, ...]]] = {
    OpKind.IndexSelect: (SELECT_CASES, SELECT_VIEW_CASES),
    OpKind.Gather: (SELECT_CASES, SELECT_VIEW_CASES),
    OpKind.MaskedFill: (SELECT_CASES, SELECT_VIEW_CASES),
    OpKind.Contiguize: (SELECT_CASES, SELECT_VIEW_CASES),
    OpKind.SelectFill: (SELECT_FILL_CASES, ()),
    **{kind: (FFT_CASES, FFT_VIEW_CASES) for kind in FFT_POINTS_IN},
}


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


def _fft_reference(fn: Callable[..., np.ndarray]) -> Callable[[Inputs, Attrs], np.ndarray]:
    return lambda a, at: fn(a[0], n=at.get("n"), axis=at.get("axis", -1), norm=at.get("norm"))


REFERENCE: dict[OpKind, Callable[[Inputs, Attrs], np.ndarray]] = {
    OpKind.IndexSelect: lambda a, at: reference.index_select(a[0], at["dim"], a[1]),
    OpKind.Gather: lambda a, at: reference.gather(a[0], at["dim"], a[1]),
    OpKind.MaskedFill: lambda a, at: reference.masked_fill(a[0], a[1], at["value"]),
    OpKind.Contiguize: lambda a, at: reference.contiguize(a[0]),
    OpKind.SelectFill: lambda a, at: reference.masked_fill(reference.index_select(a[0], at["dim"], a[1]),
                                                           a[2], at["value"]),
    OpKind.Fft: _fft_reference(fft_reference.fft),
    OpKind.Ifft: _fft_reference(fft_reference.ifft),
    OpKind.Rfft: _fft_reference(fft_reference.rfft),
    OpKind.Irfft: _fft_reference(fft_reference.irfft),
}


def _elementwise(got: np.ndarray, want: np.ndarray, binding: Binding, attrs: Attrs) -> Mismatch | None:
    return first_mismatch(got, want, binding.dtypes[-1], binding.contract.precision)


def _per_row(got: np.ndarray, want: np.ndarray, binding: Binding, attrs: Attrs) -> Mismatch | None:
    axis = normalize_dim(attrs.get("axis", -1), want.ndim)
    return worst_row_mismatch(got, want, axis, binding.contract.precision)


# op kind -> how a result is held to the contract's precision (see the module docstring)
COMPARE: dict[OpKind, Callable[[np.ndarray, np.ndarray, Binding, Attrs], Mismatch | None]] = {
    OpKind.IndexSelect: _elementwise,
    OpKind.Gather: _elementwise,
    OpKind.MaskedFill: _elementwise,
    OpKind.Contiguize: _elementwise,
    OpKind.SelectFill: _elementwise,
    **{kind: _per_row for kind in FFT_POINTS_IN},
}


def _split(n: int, pieces: int) -> list[slice]:
    bounds = np.linspace(0, n, min(pieces, max(n, 1)) + 1).astype(int)
    return [slice(int(a), int(b)) for a, b in itertools.pairwise(bounds) if b > a]


def _by_indices(inputs: Inputs, attrs: Attrs, pieces: int) -> tuple[list[tuple[Inputs, Attrs]], int]:
    """Fewer indices per piece (and the inputs after them, a select_fill's mask, the same part of
    `dim`); the results join along `dim`."""
    dim, idx = attrs["dim"], inputs[1]
    axis = 0 if idx.ndim == 1 else dim

    def part(a: np.ndarray, along: int, s: slice) -> np.ndarray:
        return np.ascontiguousarray(np.take(a, range(s.start, s.stop), axis=along))

    parts = [([inputs[0], part(idx, axis, s), *(part(m, dim, s) for m in inputs[2:])], attrs)
             for s in _split(idx.shape[axis], pieces)]
    return parts, dim


def _by_rows(inputs: Inputs, attrs: Attrs, pieces: int) -> tuple[list[tuple[Inputs, Attrs]], int]:
    """Fewer rows (axis 0) of every input per piece; the results join along axis 0."""
    rows = inputs[0].shape[0]
    parts = [([a[s] if a.ndim else a for a in inputs], attrs) for s in _split(rows, pieces)]
    return parts, 0


def _by_batch(inputs: Inputs, attrs: Attrs, pieces: int) -> tuple[list[tuple[Inputs, Attrs]], int]:
    """Fewer transforms per piece: the input split along the first axis that is not transformed
    (a 1-D input is one piece); the results join along that axis."""
    x = inputs[0]
    axis = normalize_dim(attrs.get("axis", -1), x.ndim)
    other = next((i for i in range(x.ndim) if i != axis), None)
    if other is None:
        return [(inputs, attrs)], 0
    parts = [([x[(slice(None),) * other + (s,)]], attrs) for s in _split(x.shape[other], pieces)]
    return parts, other


CHUNKINGS: dict[OpKind, Callable[[Inputs, Attrs, int], tuple[list[tuple[Inputs, Attrs]], int]]] = {
    OpKind.IndexSelect: _by_indices,
    OpKind.Gather: _by_indices,
    OpKind.MaskedFill: _by_rows,
    OpKind.Contiguize: _by_rows,
    OpKind.SelectFill: _by_indices,
    **{kind: _by_batch for kind in FFT_POINTS_IN},
}


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
        plain, views = CASES[b.op_kind]
        return list(plain) + ([c for c in views if self._accepts(c)] if native else [])

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
        inputs[0] = _view(case.view, inputs[0])
        expected = REFERENCE[b.op_kind](inputs, attrs)
        try:
            got = self.run(inputs, attrs)
            bad = COMPARE[b.op_kind](got, expected, b, attrs)
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
        parts, axis = CHUNKINGS[self.binding.op_kind](inputs, attrs, self.pieces)
        if len(parts) < 2:
            return None
        joined = np.concatenate([self.run(i, a) for i, a in parts], axis=axis)
        split = first_bit_difference(joined, first, f"bits differ when run in {len(parts)} pieces "
                                     f"joined along axis {axis}")
        return None if split is None else Failure("determinism bitwise: chunking", str(case), split)


def audit_binding(binding: Binding, runner: Any, rng: np.random.Generator, pieces: int = 3) -> BindingAudit:
    """Audit one binding through `runner` (its backend's executor); see the module docstring."""
    if not (supported(binding) and all(binding.op_kind in t for t in (CASES, REFERENCE, COMPARE))):
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
