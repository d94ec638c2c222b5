"""The `lazyfuel` command line (also `python -m lazyfuel`).

Exit codes: 0 success, 1 the work failed (a malformed document, a kernel error), 2 bad usage,
141 (128 + SIGPIPE, as a unix tool killed by it) when the reader of stdout went away (`| head`),
quietly. Errors print as one line (`file:line: key: message`) unless `--debug` is given (before or
after the subcommand); so do warnings and notices (`lazyfuel: warning: ...`).
"""

from __future__ import annotations

import argparse
import logging
import os
import select
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from lazyfuel.contracts import ContractError, format_text, parse_document
from lazyfuel.contracts.model import OpKind
from lazyfuel.contracts.parse import read_document
from lazyfuel.dtypes import DType
from lazyfuel.notices import LOGGER
from lazyfuel.providers import BACKEND_CHOICES, available_backends, default_registry
from lazyfuel.registry import Binding, NoBindingError
from lazyfuel.settings import config

if TYPE_CHECKING:
    from lazyfuel.judge import TuningPick


def _contracts_check(args: argparse.Namespace) -> int:
    failed = 0
    for path in args.files:
        try:
            bindings = _loaded(path)
        except (ContractError, OSError) as err:
            print(f"{err}", file=sys.stderr)
            failed += 1
            continue
        kernels = {b.contract.kernel for b in bindings}
        print(f"ok {path}: {len(kernels)} kernel(s), {len(bindings)} binding(s)")
    return 1 if failed else 0


def _contracts_list(args: argparse.Namespace) -> int:
    rows = [("op_kind", "dtype key", "backend", "kernel_source", "symbol", "KernelRef", "revision",
             "origin")]
    for path in args.files:
        for b in _loaded(path):
            rows.append((b.op_kind.name, "[" + ",".join(d.name for d in b.dtypes) + "]",
                         b.backend.name, b.kernel_source, b.symbol, b.kernel_ref.name, b.revision_hash,
                         b.origin))
    print(_table(rows))
    print(f"{len(rows) - 1} binding(s)")
    return 0


def _contracts_show(args: argparse.Namespace) -> int:
    for path in args.files:
        doc = parse_document(read_document(path), path)
        print(f"# {doc.provider.name} ({doc.provider.backend}, {doc.provider.kernel_source}) — {path}")
        for c in doc.contracts:
            if args.kernel and c.kernel != args.kernel:
                continue
            dtypes = ", ".join(f"{i.name}: {'/'.join(d.name for d in i.dtypes)}" for i in c.inputs)
            print(f"\n## {c.kernel} ({c.op_kind}) — {c.blurb}\n   inputs {dtypes}; "
                  f"layout strategy {c.caps.awkward_layout_strategy}; determinism {c.determinism}; "
                  f"bytes_moved = {c.cost.bytes_moved.text}\n")
            print(c.doc.strip())
    return 0


def _contracts_fmt(args: argparse.Namespace) -> int:
    for path in args.files:
        text = format_text(read_document(path), path)
        if args.write:
            Path(path).write_text(text, encoding="utf-8")
            print(f"formatted {path}", file=sys.stderr)
        else:
            sys.stdout.write(text)
    return 0


def _devices(args: argparse.Namespace) -> int:
    from lazyfuel.backends.catalog import describe_devices

    print(describe_devices())
    return 0


def _select(args: argparse.Namespace) -> Callable[[Binding], bool]:
    """Keep the bindings matching `--op` and `--dtype` (any when not given)."""
    ops = {OpKind.parse(o) for o in args.op or ()}
    dtypes = {DType.parse(d) for d in args.dtype or ()}
    return lambda b: (not ops or b.op_kind in ops) and (not dtypes or b.dtypes[0] in dtypes)


def _judge(args: argparse.Namespace) -> int:
    from lazyfuel.judge import JudgeCache, Progress
    from lazyfuel.measured import judge_registry, measured_costs
    from lazyfuel.tuned import tunable, tune_kernels

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
    print(_table(rows))
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


class UsageError(Exception):
    """A command line that cannot be carried out as given (exit 2), e.g. `--device` naming no device."""


def _use_device(args: argparse.Namespace) -> None:
    """--device and --backend reach every layer (and worker processes) through the environment,
    which `lazyfuel.config` then reads again. A --device that names no Vulkan device here is a
    UsageError listing the devices there are."""
    if getattr(args, "device", None):
        _check_device(args.device)
        os.environ["LAZYFUEL_DEVICE"] = args.device
    if getattr(args, "backend_choice", None):
        os.environ["LAZYFUEL_BACKEND"] = args.backend_choice
    config.reload()


def _check_device(wanted: str) -> None:
    from lazyfuel.backends.catalog import choose_device

    try:
        choose_device(wanted.strip(), "--device")
    except Exception as err:  # no device matches, or no device backend at all: say which there are
        raise UsageError(str(err) if str(err).startswith("--device") else
                         f"--device={wanted!r}: no Vulkan device can be listed here: {err}") from err


def _device_name() -> str:
    """Where kernels may run (for bench's title): the device the best device backend picks and
    the numpy reference, or numpy alone."""
    from lazyfuel.backends import catalog

    usable = available_backends()
    for found in catalog.registered():
        if found.choose_device is not None and found.backend in usable:
            info = found.choose_device(None, "LAZYFUEL_DEVICE")
            return f"{info.name} [{info.index}, {info.kind}] ({found.backend.name}) and the CPU (numpy)"
    return "the CPU via numpy (cpu backend)"


def _as_runtime_error(err: Exception) -> Exception:
    """Expected errors as they are; anything else as a RuntimeError (one line unless --debug)."""
    from lazyfuel.pipeline import GraphError

    if isinstance(err, (GraphError, ContractError, NoBindingError, OSError, ValueError, TypeError,
                        IndexError, LookupError, RuntimeError, MemoryError)):
        return err
    return RuntimeError(f"{type(err).__name__}: {err}")


def _warning_line(text: str) -> str:
    return f"lazyfuel: warning: {text.removeprefix('lazyfuel: ')}"


class _NoticeLines(logging.Handler):
    """The `lazyfuel` logger's records as `lazyfuel: warning: …` lines on the stderr of the moment."""

    def emit(self, record: logging.LogRecord) -> None:
        print(_warning_line(record.getMessage()), file=sys.stderr, flush=True)


def _one_line_notices() -> None:
    """Warnings (an unmeasured cost, …) and the `lazyfuel` logger's notices (a backend that cannot
    run) as one `lazyfuel: warning: …` line each on stderr, without the source line Python shows;
    --debug keeps Python's formats."""
    import warnings

    def show(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
        print(_warning_line(str(message)), file=sys.stderr, flush=True)

    warnings.showwarning = show  # type: ignore[assignment]
    if not any(isinstance(h, _NoticeLines) for h in LOGGER.handlers):
        LOGGER.addHandler(_NoticeLines())


def _run(args: argparse.Namespace) -> int:
    from lazyfuel.pipeline import build, execute, load_graph
    from lazyfuel.pipeline.report import summary

    _use_device(args)
    graph = load_graph(args.graph, dict(args.set or ()))
    try:
        built = build(graph)
        result = execute(built, scheduler=args.scheduler, progress=not args.no_progress)
    except Exception as err:
        converted = _as_runtime_error(err)
        if converted is err:
            raise
        raise converted from err
    print(summary(built, result))
    return 0


def _explain(args: argparse.Namespace) -> int:
    from lazyfuel.pipeline import explain, load_graph

    _use_device(args)
    print(explain(load_graph(args.graph, dict(args.set or ()))), end="")
    return 0


def _bench(args: argparse.Namespace) -> int:
    from lazyfuel.bench import FULL_SIZES, QUICK_SIZES, measure, plot, table

    _use_device(args)
    sizes = tuple(int(s * 2**20) for s in args.sizes) if args.sizes else (QUICK_SIZES if args.quick
                                                                          else FULL_SIZES)
    device = f"{_device_name()}; backend {config.backend}"
    print(f"lazyfuel bench on {device}; sizes {', '.join(f'{s / 2**20:g} MiB' for s in sizes)}",
          file=sys.stderr)
    timings = measure(args.op, sizes, repeats=args.repeats or (2 if args.quick else 3),
                      progress=lambda line: print(line, file=sys.stderr, flush=True))
    print(table(timings))
    out = plot(timings, args.out, device)
    print(f"plot written to {out}")
    return 0


def _scheduler(text: str) -> str:
    if text in ("threads", "processes", "sync") or ":" in text:
        return text
    raise argparse.ArgumentTypeError(f"{text!r} is not threads, processes, sync or a scheduler address "
                                     "like tcp://127.0.0.1:8786")


def _assignment(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    return name.strip(), value.strip()


def _sizes(text: str) -> list[float]:
    try:
        sizes = [float(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of MiB") from None
    if not sizes or min(sizes) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: sizes must be positive MiB")
    return sizes


def _add_graph_commands(sub: argparse._SubParsersAction) -> None:
    """`run`, `explain` and `bench`."""
    run = sub.add_parser("run", help="run a pipeline graph (graphs/*.yaml) with a progress bar and a summary",
                         description="Run a pipeline graph: build its inputs and steps lazily, compute "
                         "every output (progress bar on stderr), print each output's shape, dtype and "
                         "checksum, then wall time, bytes moved, GB/s, bindings and device.")
    explain = sub.add_parser("explain", help="print each output's plan (lf.explain) without running",
                             description="Print lf.explain of every output of a graph: the fused tasks, "
                             "bindings, Contiguize steps and estimated cost. Writes and runs nothing.")
    for p in (run, explain):
        p.add_argument("graph", metavar="GRAPH.yaml", help="the pipeline graph")
        p.add_argument("--set", action="append", type=_assignment, metavar="NAME=VALUE",
                       help="override one of the graph's params (repeatable)")
    run.add_argument("--scheduler", type=_scheduler, default="threads", metavar="threads|processes|ADDRESS",
                     help="dask scheduler: threads (default), processes, sync, or a distributed "
                     "scheduler's address")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.set_defaults(func=_run)
    explain.set_defaults(func=_explain)

    bench = sub.add_parser("bench", help="numpy vs dask vs lazyfuel on each op and size: a table and a PNG",
                           description="Time index_select, gather, masked_fill and transpose+contiguous "
                           "in numpy, dask and lazyfuel; print a table and plot GB/s by op and size.")
    bench.add_argument("--quick", action="store_true", help="two small sizes, two repeats (seconds)")
    bench.add_argument("--out", default="lazyfuel-bench.png", metavar="FILE.png",
                       help="where to write the plot (default: lazyfuel-bench.png)")
    bench.add_argument("--op", action="append", help="only this op (repeatable)")
    bench.add_argument("--sizes", type=_sizes, metavar="MiB,MiB,…", help="source sizes in MiB")
    bench.add_argument("--repeats", type=int, help="timed runs per point (the best is kept)")
    bench.set_defaults(func=_bench)
    for p in (run, explain, bench):
        p.add_argument("--device", help="Vulkan device: index or name substring (sets LAZYFUEL_DEVICE)")
        p.add_argument("--backend", dest="backend_choice", type=str.lower, choices=BACKEND_CHOICES,
                       help="force a backend (sets LAZYFUEL_BACKEND; default auto)")


def _loaded(path: str) -> list[Binding]:
    """The bindings `lf.load_contracts(path)` would give: the document loaded into a copy of the
    default registry (so a binding competing with a default one is refused as it would be there;
    a shipped document's bindings are the default ones, origin "default")."""
    return default_registry().copy().load(Path(path))


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="lazyfuel", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("devices", help="list the Vulkan devices and the one the pool picks"
                   ).set_defaults(func=_devices)

    contracts = sub.add_parser("contracts", help="check, list, show or format contract documents")
    csub = contracts.add_subparsers(dest="action", required=True)
    for name, func, help_ in (("check", _contracts_check, "parse and link; non-zero exit on any error"),
                              ("list", _contracts_list, "one row per binding"),
                              ("show", _contracts_show, "print each kernel's documentation"),
                              ("fmt", _contracts_fmt, "print the canonical indented form")):
        p = csub.add_parser(name, help=help_)
        p.add_argument("files", nargs="+", metavar="FILE")
        p.set_defaults(func=func)
        if name == "show":
            p.add_argument("--kernel", help="only this kernel")
        if name == "fmt":
            p.add_argument("--write", action="store_true", help="rewrite the file in place")

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
    _add_graph_commands(sub)
    _debug_everywhere(parser)
    return parser


def _debug_everywhere(parser: argparse.ArgumentParser) -> None:
    """Accept --debug after any subcommand too (`lazyfuel run g.yaml --debug`); a subcommand's
    copy leaves the top-level value alone unless given (default SUPPRESS)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                child.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                                   help="show tracebacks on errors")
                _debug_everywhere(child)


EXIT_BROKEN_PIPE = 128 + 13  # what a shell reports for a unix tool killed by SIGPIPE


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    if not args.debug:
        _one_line_notices()
    try:
        code = func(args)
        sys.stdout.flush()  # a reader that went away shows here, not in Python's flush at exit
        return code
    except BrokenPipeError as err:
        if _reader_gone(sys.stdout):
            return _quiet_broken_pipe()
        return _failed(err, args.debug)
    except UsageError as err:
        if args.debug:
            raise
        print(f"lazyfuel: {err}", file=sys.stderr)
        return 2
    except (ContractError, NoBindingError, OSError, ValueError, TypeError, IndexError,
            LookupError, RuntimeError, MemoryError) as err:
        return _failed(err, args.debug)


def _failed(err: Exception, debug: bool) -> int:
    """Exit 1 with the error on one line (raised again with --debug, for its traceback)."""
    if debug:
        raise err
    print(f"lazyfuel: {err}", file=sys.stderr)
    return 1


def _reader_gone(stream: object) -> bool:
    """Whether `stream` is a pipe or socket whose reading end is closed (poll reports an error)."""
    try:
        poller = select.poll()
        poller.register(stream.fileno(), select.POLLOUT)  # type: ignore[attr-defined]
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no file descriptor (a test's capture)
        return False


def _quiet_broken_pipe() -> int:
    """Stop as `yes | head` does: no message, and nothing more written to the closed stdout (its
    descriptor now points at /dev/null, so Python's flush at exit finds nowhere to fail)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
