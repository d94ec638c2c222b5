"""`lazyfuel judge` (measure every binding's cost here, cached) and `lazyfuel audit` (check every
binding against the CPU reference), each narrowed by `--backend`, `--op` and `--dtype`."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from lazyfuel.commands.text import table
from lazyfuel.contracts.model import OpKind
from lazyfuel.dtypes import DType
from lazyfuel.providers import BACKEND_CHOICES, available_backends
from lazyfuel.registry import Binding

if TYPE_CHECKING:
    from lazyfuel.judge import TuningPick


def _select(args: argparse.Namespace) -> Callable[[Binding], bool]:
    """Keep the bindings matching `--op` and `--dtype` (any when not given)."""
    ops = {OpKind.parse(o) for o in args.op or ()}
    dtypes = {DType.parse(d) for d in args.dtype or ()}
    return lambda b: (not ops or b.op_kind in ops) and (not dtypes or b.dtypes[0] in dtypes)


def _judge(args: argparse.Namespace) -> int:
    from lazyfuel.judge import JudgeCache, Progress
    from lazyfuel.judged_costs import judge_registry, measured_costs
    from lazyfuel.shape_tuning import tunable, tune_kernels

    cache = JudgeCache()
    backends = available_backends(args.backend)
    verdicts = judge_registry(backends=backends, quick=args.quick, force=args.force, cache=cache,
                              select=_select(args), progress=Progress())
    rows = [("op_kind", "dtype key", "backend", "symbol", "latency", "per dispatch", "GB/s", "spread",
             "clock")]
    for v in verdicts:
        j, b = v.judgement, v.binding
        if j is None:
            rows.append((b.op_kind.name, "", b.backend.name, b.symbol, "failed", "", "", "", v.error))
            continue
        rows.append((b.op_kind.name, j.dtypes, b.backend.name, b.symbol, f"{j.latency_s * 1e6:.1f} µs",
                     f"{j.dispatch_s * 1e6:.1f} µs", f"{j.bytes_per_s / 1e9:.2f}", f"{j.spread:.0%}",
                     f"{j.clock}, {'measured' if v.measured else 'cached'}"))
    print(table(rows))
    for backend, t in measured_costs(backends=backends, cache=cache).transfers.items():
        print(f"transfers on {backend} ({t.mode}): submit {t.submit_s * 1e6:.1f} µs; host to device "
              f"{t.up_fixed_s * 1e6:.1f} µs + {t.up_bytes_per_s / 1e9:.2f} GB/s; device to host "
              f"{t.down_fixed_s * 1e6:.1f} µs + {t.down_bytes_per_s / 1e9:.2f} GB/s per array")
    if tunable(backends) and not args.op and not args.dtype:
        _print_tuning(tune_kernels(cache, quick=args.quick, force=args.force, backends=backends))
    print(f"{sum(v.measured for v in verdicts)} measured, {sum(not v.measured for v in verdicts)} "
          f"cached; cache {cache.path}")
    return 1 if any(v.judgement is None for v in verdicts) else 0


def _print_tuning(picks: Sequence[tuple[TuningPick, bool]]) -> None:
    """One line per tuned kernel family: the choice, why, and each candidate's median (spread)."""
    print("kernel shapes (workgroup x elements per invocation; kernel clock, median ± spread):")
    for pick, measured in picks:
        times = ", ".join(f"{t.shape[0]}x{t.shape[1]} {t.seconds * 1e3:.2f} ms ±{t.spread:.0%}"
                          for t in pick.timings)
        print(f"  {pick.reason} [{times}; {'measured' if measured else 'cached'}]")


def _audit(args: argparse.Namespace) -> int:
    from lazyfuel.audit import audit
    from lazyfuel.judge import Progress

    # no --backend: every backend, those that cannot run here listed as skipped with the reason
    backends = available_backends(args.backend) if args.backend else None
    report = audit(backends=backends, seed=args.seed, select=_select(args), progress=Progress())
    print(report.table())
    return 0 if report.ok else 1


def add_binding_commands(sub: argparse._SubParsersAction) -> None:
    """`judge` and `audit`."""
    judge = sub.add_parser("judge", help="measure each binding's cost on this machine's devices (cached)")
    judge.add_argument("--quick", action="store_true", help="fewer sizes and repeats (under a minute)")
    judge.add_argument("--force", action="store_true", help="measure again even what is cached")
    audit = sub.add_parser("audit", help="check every binding against the CPU reference and its "
                           "declared precision and determinism; exit 1 on any failure")
    audit.add_argument("--seed", type=int, help="seed of the random data (default: fresh)")
    for p, func, default in ((judge, _judge, "every usable one"),
                             (audit, _audit, "every one, those that cannot run here listed as skipped")):
        p.add_argument("--backend", type=str.lower, choices=BACKEND_CHOICES,
                       help=f"only this backend, or auto: every usable one (default: {default})")
        p.add_argument("--op", action="append", help="only this op kind (repeatable)")
        p.add_argument("--dtype", action="append", help="only bindings of this data dtype (repeatable)")
        p.set_defaults(func=func)
