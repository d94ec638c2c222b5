"""W2's first compute to host over many fresh processes, lazyfuel beside torch, split (issue 18).

Decides: why lazyfuel's first W2 compute to host over the 6 GiB table ran 1.17-1.33x torch CPU
`index_select`'s first in session 13 where its later computes ran 0.45-0.61x (1M random int64
ids over a (rows, 256) f32 table in 16 chunks, fresh process, empty judge cache; the result a new
1 GiB array): whether it is the gather itself, the result's page faults (numpy advises huge pages
on large arrays, torch does not), or fixed costs before the first row is taken. `--rounds` rounds
of fresh processes: lazyfuel, torch, and lazyfuel with numpy's huge-page advice off for its
results, each first in turn so drift between processes falls on all. Each child computes
`--computes` times and reports every wall; a lazyfuel child also reports, for its first compute,
the ms before its first row gather starts (`lead`), the gathers' span and the ms after the last
ends (`tail`), from `take_rows` wrapped there. After the timed computes each child measures, for
the record, a gather into an array already touched and an array of the result's size made fresh
and touched on every thread with and without numpy's huge-page advice. The kernel's
transparent-huge-page settings are printed. Every result is compared with numpy.

    python benchmarks/probes/w2_first.py [--gib 6] [--rounds 6] [--ids 1048576] [--computes 3]
        [--configs "lazyfuel;torch;lazyfuel, copy threads 1"]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from data_path import CPUS, W2_CHUNKS, W2_COLS, torch, w2_inputs

import lazyfuel as lf
from lazyfuel.backends.cpu import kernels as cpu_kernels
from lazyfuel.graph import lower as lowering

CONFIGS = ("lazyfuel", "torch", "lazyfuel, plain pages")  # the last: numpy's huge-page advice off
COPY_THREADS = "lazyfuel, copy threads "  # + N: `LAZYFUEL_COPY_THREADS=N` (`--configs`)
THP = Path("/sys/kernel/mm/transparent_hugepage")


def thp_settings() -> str:
    """The kernel's transparent-huge-page `enabled` and `defrag` settings, as it prints them."""
    found = []
    for name in ("enabled", "defrag"):
        try:
            found.append(f"{name}: {(THP / name).read_text().strip()}")
        except OSError:
            found.append(f"{name}: unreadable")
    return "; ".join(found)


def fresh_touched_ms(nbytes: int, advise: bool) -> float:
    """ms to make `nbytes` with `np.empty` and write every page of it on CPUS threads, numpy's
    huge-page advice on or off."""
    from numpy._core.multiarray import _set_madvise_hugepage
    before = _set_madvise_hugepage(advise)
    try:
        start = time.perf_counter()
        a = np.empty(nbytes, np.uint8)
        step = -(-nbytes // CPUS)
        with ThreadPoolExecutor(CPUS) as threads:
            list(threads.map(lambda s: a[s:s + step].fill(1), range(0, nbytes, step)))
        return (time.perf_counter() - start) * 1e3
    finally:
        _set_madvise_hugepage(before)


class Gathers:
    """`take_rows` as the CPU kernels call it, wrapped: the start and end of each call; and the
    start of each task of a compute into one array (`store_made` as the lowering lays it out)."""

    def __init__(self) -> None:
        self.spans: list[tuple[float, float]] = []
        self.tasks: list[float] = []
        self._lock = threading.Lock()
        self._inner = cpu_kernels.take_rows
        self._task = lowering.store_made

    def __enter__(self) -> Gathers:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return self._inner(*args, **kwargs)
            finally:
                with self._lock:
                    self.spans.append((start, time.perf_counter()))

        def task(*args: Any, **kwargs: Any) -> Any:
            self.tasks.append(time.perf_counter())
            return self._task(*args, **kwargs)
        cpu_kernels.take_rows, lowering.store_made = timed, task
        return self

    def __exit__(self, *exc: object) -> None:
        cpu_kernels.take_rows, lowering.store_made = self._inner, self._task


def child(spec: dict[str, Any]) -> int:
    """One configuration in this fresh process: prints its figures as one JSON line."""
    table, ids = w2_inputs(spec["gib"], spec["ids"])
    expected = table[ids]
    found: dict[str, Any] = {"config": spec["config"]}
    times = []
    if spec["config"].endswith("plain pages"):  # after the table is made: only the results' pages
        from numpy._core.multiarray import _set_madvise_hugepage
        _set_madvise_hugepage(False)
    if spec["config"].startswith("lazyfuel"):
        rows = len(table)
        y = lf.index_select(lf.from_array(table, chunks=(-(-rows // W2_CHUNKS), W2_COLS)), 0, ids)
        lf.explain(y)  # as data_path's child: the plan printed before the first compute
        for k in range(spec["computes"]):
            with Gathers() as gathers:
                start = time.perf_counter()
                got = y.compute()
                end = time.perf_counter()
            times.append(end - start)
            if k == 0:
                spans = gathers.spans
                found.update(lead_ms=(min(a for a, _ in spans) - start) * 1e3,
                             task_ms=(min(gathers.tasks, default=start) - start) * 1e3,
                             gathers_ms=(max(b for _, b in spans) - min(a for a, _ in spans)) * 1e3,
                             tail_ms=(end - max(b for _, b in spans)) * 1e3, gathers=len(spans))
            if got.tobytes() != expected.tobytes():
                raise SystemExit("lazyfuel: differs from numpy")
        out = np.empty_like(expected)
        out.fill(0)
        start = time.perf_counter()
        y.compute(out=out)
        found["into_touched_ms"] = (time.perf_counter() - start) * 1e3
        if out.tobytes() != expected.tobytes():
            raise SystemExit("lazyfuel compute(out=): differs from numpy")
    else:
        t, i = torch.from_numpy(table), torch.from_numpy(ids)
        for _ in range(spec["computes"]):
            start = time.perf_counter()
            got = torch.index_select(t, 0, i)
            times.append(time.perf_counter() - start)
            if got.numpy().tobytes() != expected.tobytes():
                raise SystemExit("torch: differs from numpy")
        out = torch.zeros(expected.shape)
        start = time.perf_counter()
        torch.index_select(t, 0, i, out=out)
        found["into_touched_ms"] = (time.perf_counter() - start) * 1e3
    found["times_ms"] = [s * 1e3 for s in times]
    found["fresh_advised_ms"] = fresh_touched_ms(expected.nbytes, True)
    found["fresh_plain_ms"] = fresh_touched_ms(expected.nbytes, False)
    print(json.dumps(found))
    return 0


def run_child(gib: float, n_ids: int, config: str, computes: int) -> dict[str, Any]:
    """`config` in a fresh process with an empty judge cache: its figures, or {"failed": tail}."""
    with tempfile.TemporaryDirectory(prefix="lazyfuel-judge-") as cache:
        env = {**os.environ, "LAZYFUEL_CACHE_DIR": cache, "LAZYFUEL_BACKEND": "auto"}
        if config.startswith(COPY_THREADS):
            env["LAZYFUEL_COPY_THREADS"] = config[len(COPY_THREADS):]
        spec = json.dumps({"gib": gib, "ids": n_ids, "config": config, "computes": computes})
        done = subprocess.run([sys.executable, __file__, "--child", spec], env=env,
                              capture_output=True, text=True, timeout=600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if done.returncode == 0 and lines else {
        "config": config, "failed": (done.stdout + done.stderr)[-1500:]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=6.0, help="the table's size")
    parser.add_argument("--ids", type=int, default=1 << 20)
    parser.add_argument("--rounds", type=int, default=6, help="rounds of one fresh process per configuration")
    parser.add_argument("--computes", type=int, default=3, help="computes timed per process")
    parser.add_argument("--configs", default=";".join(CONFIGS),
                        help=f"configurations, ';'-separated: of {', '.join(CONFIGS)}, or "
                        f"'{COPY_THREADS}N' (lazyfuel with LAZYFUEL_COPY_THREADS=N)")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(json.loads(args.child))
    configs = tuple(c.strip() for c in args.configs.split(";") if c.strip())
    unknown = [c for c in configs if c not in CONFIGS and not c.startswith(COPY_THREADS)]
    if unknown:
        parser.error(f"--configs: unknown {unknown}; accepted: {', '.join(CONFIGS)}, '{COPY_THREADS}N'")
    configs = configs if torch is not None else tuple(c for c in configs if c != "torch")
    print(f"W2 first compute to host: {args.ids} ids over {args.gib:g} GiB, {CPUS} CPUs, "
          f"transparent huge pages {thp_settings()}; {time.strftime('%Y-%m-%d %H:%M:%S %Z')}", flush=True)
    run_child(args.gib, args.ids, configs[0], 1)  # a fresh machine's first process is slow: untimed
    print("\n| round | configuration | every compute ms | lead / gathers / tail ms (first) | into touched "
          "ms | result-size array fresh + touched ms, advised / plain |\n|---|---|---|---|---|---|",
          flush=True)
    firsts: dict[str, list[float]] = {c: [] for c in configs}
    for pair in range(args.rounds):
        turn = pair % len(configs)
        for config in configs[turn:] + configs[:turn]:  # each first in turn: drift falls on all
            got = run_child(args.gib, args.ids, config, args.computes)
            if "failed" in got:
                print(f"| {pair} | {config} | FAILED: {got['failed']} |", flush=True)
                continue
            firsts[config].append(got["times_ms"][0])
            split = (f"{got['lead_ms']:.1f} (first task {got['task_ms']:.1f}) / {got['gathers_ms']:.1f} / "
                     f"{got['tail_ms']:.1f} "
                     f"({got['gathers']} calls)" if "lead_ms" in got else "-")
            print(f"| {pair} | {config} | {' '.join(f'{t:.1f}' for t in got['times_ms'])} | {split} | "
                  f"{got['into_touched_ms']:.1f} | {got['fresh_advised_ms']:.1f} / "
                  f"{got['fresh_plain_ms']:.1f} |", flush=True)
    print("\nfirst compute, ms: " + "; ".join(
        f"{c} median {statistics.median(v):.1f} (min {min(v):.1f}, max {max(v):.1f}, n {len(v)})"
        for c, v in firsts.items() if v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
