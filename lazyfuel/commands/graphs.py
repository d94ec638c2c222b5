"""`lazyfuel run GRAPH.yaml`, `lazyfuel explain GRAPH.yaml` and `lazyfuel bench`: the commands that
build lazyfuel graphs and plan or run them on a chosen device and backend."""

from __future__ import annotations

import argparse
import sys

from lazyfuel.commands.devices import device_name, use_device
from lazyfuel.commands.errors import as_runtime_error
from lazyfuel.providers import BACKEND_CHOICES
from lazyfuel.settings import config


def _run(args: argparse.Namespace) -> int:
    from lazyfuel.pipeline import build, execute, load_graph
    from lazyfuel.pipeline.report import summary

    use_device(args)
    graph = load_graph(args.graph, dict(args.set or ()))
    try:
        built = build(graph)
        result = execute(built, scheduler=args.scheduler, progress=not args.no_progress)
    except Exception as err:
        converted = as_runtime_error(err)
        if converted is err:
            raise
        raise converted from err
    print(summary(built, result))
    return 0


def _explain(args: argparse.Namespace) -> int:
    from lazyfuel.pipeline import explain, load_graph

    use_device(args)
    print(explain(load_graph(args.graph, dict(args.set or ()))), end="")
    return 0


def _bench(args: argparse.Namespace) -> int:
    from lazyfuel.bench import FULL_SIZES, QUICK_SIZES, measure, plot, table

    use_device(args)
    sizes = tuple(int(s * 2**20) for s in args.sizes) if args.sizes else (QUICK_SIZES if args.quick
                                                                          else FULL_SIZES)
    device = f"{device_name()}; backend {config.backend}"
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


def add_graph_commands(sub: argparse._SubParsersAction) -> None:
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
