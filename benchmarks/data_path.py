"""The data path through lazyfuel's public API against torch and numpy, side by side in one process.

Issue 18's workload W1: x = (N, 1024) float32 of `--gib` GiB (4 by default: N = 1M), y =
masked_fill(index_select(x, 0, idx), mask, -1) with idx permuting the rows inside each chunk
(each output block reads one source chunk) and mask (N, 1) broadcast along the rows. Per chunk
size (`--mibs`, 8 MiB to 1 GiB by default), on dask's threaded scheduler (`--threads`):

- lazyfuel, pageable: x a plain numpy array, `y.compute(out=reused)` into a touched array;
- lazyfuel, page-locked: x and the reused result from `lf.empty_pinned`;
- torch at its best (CUDA only): x, indices, mask and result as pinned tensors, chunks round-robin
  on 3 CUDA streams, every copy `non_blocking=True`;
- torch as a user first writes it (CUDA only): per chunk `torch.from_numpy(x[rows]).cuda()`,
  index_select, masked_fill, `.cpu()` into the result;

and the CPU and CuPy peers below. Each configuration runs
once cold (its first compute at that chunk size: allocation and pipeline creation included,
the `first` column), then `--rounds` times; cells are GB/s of x (bytes of x / wall), median
(best). `up` / `down`: the host bytes lazyfuel's device read and wrote per compute, from
`lf.profile` (bytes per link direction). Every result is compared bit for bit with numpy on the
first, a middle and the last chunk. A second table runs lazyfuel pageable at `--sweep-mibs` for
each of `--sweep-threads` (steady across thread counts?).

Workload W2 (`--workloads w2`): 1M random int64 ids (`--w2-ids`) over a (rows, 256) f32 host table
of `--w2-gib` GiB (4 and 6 by default) in 16 chunks, each configuration in a fresh process with an
empty judge cache (`LAZYFUEL_CACHE_DIR` a new folder: the planner prices with its priors): lazyfuel
`compute()` (result to host; what the planner picked, from `lf.explain`) and `compute(device=True)`
(the result on the GPU; what it picked from `lf.explain(y, device=True)`; with `--w2-ways`, also
with `config.host_rows` forced), torch on the CPU
(`index_select`, all threads), torch gathering on the CPU into pinned memory and copying it up
(`non_blocking`), numpy `take` on all threads.
Seconds of the first compute in that process, then the best of the rest (`again`). The pair the
acceptance compares, lazyfuel and torch `index_select` to host, each run in `--w2-processes`
fresh processes (3), in turn: the first compute swings 50-80 ms from one process to the next
(decision 113), so the row is the medians of the processes.

W1's CPU and CuPy peers (once, at the first chunk size): numpy and torch on the CPU with every
thread (numpy one chunk per task on a pool of one thread per CPU), CuPy at its best (pinned host
arrays, 3 streams).

    python benchmarks/data_path.py            # the H200 run (4 GiB; about 3 minutes with torch)
    python benchmarks/data_path.py --quick    # lavapipe / CI: 128 MiB, chunks of 8-32 MiB, 2 threads;
                                              # W2 over a 64 MiB table

`--json PATH` also writes every timing. Figures: BENCHMARKS.md, "data_path".
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
os.environ.setdefault("LAZYFUEL_BACKEND", "vulkan")

import lazyfuel as lf
from lazyfuel.backends.vulkan import get_pool

try:
    import torch
except ImportError:  # torch is optional: its rows are left out
    torch = None
try:
    import cupy
    import cupyx
except ImportError:  # CuPy is optional: its rows are left out
    cupy = cupyx = None
CUDA = torch is not None and torch.cuda.is_available()
COLS = 1024
STREAMS = 3
W2_COLS = 256
W2_CHUNKS = 16
W2_WAYS = ("in-place", "streamed")  # `config.host_rows` forced, beside the planner's own pick
W2_COMPUTES = 5  # computes timed per W2 configuration: the first, then again (the best of the rest)
CPUS = os.cpu_count() or 1


def make_inputs(gib: float) -> tuple[np.ndarray, np.ndarray]:
    """x (N, COLS) f32 of about `gib` GiB (random, column 0 the row number, so rows differ) and a
    (N, 1) bool mask."""
    rows = max(1, int(gib * 2**30) // (COLS * 4))
    tile = np.random.default_rng(1).standard_normal((min(rows, 16384), COLS), dtype=np.float32)
    x = np.empty((rows, COLS), np.float32)
    for start in range(0, rows, len(tile)):
        x[start:start + len(tile)] = tile[:rows - start]
    x[:, 0] = np.arange(rows, dtype=np.float32)
    return x, np.random.default_rng(2).random((rows, 1)) < 0.5


def _mib(text: str) -> int | float:
    """A chunk size in MiB as given: `16`, or `0.25` for chunks scaled down to lavapipe."""
    value = float(text)
    return int(value) if value == int(value) else value


def permutation(n: int, chunk_rows: int, seed: int) -> np.ndarray:
    """Row indices permuting the rows inside each chunk of `chunk_rows`."""
    rng = np.random.default_rng(seed)
    return np.concatenate([start + rng.permutation(min(chunk_rows, n - start))
                           for start in range(0, n, chunk_rows)]).astype(np.int64)


def check(got: np.ndarray, x: np.ndarray, idx: np.ndarray, mask: np.ndarray, chunk_rows: int,
          who: str) -> None:
    """Bit-equality with numpy on the first, a middle and the last chunk."""
    n_chunks = -(-len(x) // chunk_rows)
    for c in sorted({0, n_chunks // 2, n_chunks - 1}):
        rows = slice(c * chunk_rows, min((c + 1) * chunk_rows, len(x)))
        expected = np.where(mask[rows], np.float32(-1), x[idx[rows]])
        if got[rows].tobytes() != expected.tobytes():
            raise SystemExit(f"{who}: chunk {c} differs from numpy")


class Measured:
    """The seconds of one configuration: the cold first run, then the rounds."""

    def __init__(self, first: float, rounds: list[float], extra: dict[str, Any] | None = None) -> None:
        self.first, self.rounds, self.extra = first, rounds, extra or {}

    def cells(self, nbytes: int) -> tuple[str, str]:
        gbs = [nbytes / s / 1e9 for s in self.rounds]
        return f"{nbytes / self.first / 1e9:.2f}", f"{statistics.median(gbs):.2f} ({max(gbs):.2f})"


def measure(run: Callable[[], Any], n_rounds: int, verify: Callable[[Any], None]) -> Measured:
    """One cold run (checked after its clock stopped), then `n_rounds` timed runs."""
    start = time.perf_counter()
    got = run()
    first = time.perf_counter() - start
    verify(got)
    times = []
    for _ in range(n_rounds):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return Measured(first, times)


def lazyfuel_run(x: np.ndarray, idx: np.ndarray, mask: np.ndarray, chunk_rows: int, threads: int,
                 out: np.ndarray, n_rounds: int) -> Measured:
    """W1 through the public API, `compute(out=)` into `out` (reused by every run)."""
    y = lf.masked_fill(lf.index_select(lf.from_array(x, chunks=(chunk_rows, COLS)), 0, idx), mask, -1.0)
    profiles = []

    kept = get_pool().kept
    made = []  # bytes of pageable pages imported by each compute (kept imports, `kept.py`)

    def run() -> np.ndarray:
        before = kept.made_bytes
        with lf.profile() as p:
            y.compute(out=out, scheduler="threads", num_workers=threads)
        profiles.append(p)
        made.append(kept.made_bytes - before)
        return out

    found = measure(run, n_rounds, lambda got: check(got, x, idx, mask, chunk_rows, "lazyfuel"))
    last = profiles[-1]
    found.extra = {"up": last.bytes_uploaded, "down": last.bytes_downloaded, "programs": last.programs,
                   "device_s": last.device_seconds, "kept_imported_bytes": made}
    return found


def torch_naive(x: np.ndarray, idx: np.ndarray, mask: np.ndarray, out: np.ndarray,
                chunk_rows: int) -> np.ndarray:
    """As a user first writes it: pageable `.cuda()`, the ops, `.cpu()`, chunk after chunk."""
    n = len(x)
    for start in range(0, n, chunk_rows):
        rows = slice(start, min(start + chunk_rows, n))
        g = torch.from_numpy(x[rows]).cuda()
        i = torch.from_numpy(idx[rows] - start).cuda()
        m = torch.from_numpy(mask[rows]).cuda()
        out[rows] = g.index_select(0, i).masked_fill(m, -1.0).cpu().numpy()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=4.0, help="size of x")
    parser.add_argument("--mibs", default="8,16,32,64,128,256,512,1024",
                        help="chunk sizes, MiB (fractions too: 0.25)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="dask threads")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sweep-threads", default="4,8",
                        help="thread counts of the second table ('' skips it)")
    parser.add_argument("--sweep-mibs", default="16,64,256,1024", help="chunk sizes of the second table")
    parser.add_argument("--no-pinned", action="store_true", help="leave out the page-locked rows")
    parser.add_argument("--naive-mibs", default="",
                        help="chunk sizes of the torch-as-first-written rows (default: all; ~1 GB/s each)")
    parser.add_argument("--quick", action="store_true",
                        help="lavapipe / CI: 128 MiB, chunks of 8,16,32 MiB, 2 threads, 1 round, no sweep")
    parser.add_argument("--alloc", action="store_true",
                        help="first time making and destroying one block per memory use at 64 MiB, 192 MiB, "
                        "1 GiB (what a compute pays for each buffer it cannot reuse)")
    parser.add_argument("--json", default="", help="also write every timing here")
    parser.add_argument("--workloads", default="w1,w2",
                        help="comma-separated: w1, w2 (host data), w3, w4 (resident, on the GPU)")
    parser.add_argument("--w2-gib", default="4,6", help="W2's table sizes, GiB")
    parser.add_argument("--w2-ids", type=int, default=1 << 20, help="W2's number of ids")
    parser.add_argument("--w2-backend", default="auto", help="LAZYFUEL_BACKEND of W2's lazyfuel processes")
    parser.add_argument("--w2-only", default="",
                        help="W2 configurations to run: name prefixes, comma-separated (=NAME: exactly)")
    parser.add_argument("--w2-ways", default="",
                        help=f"W2 on the GPU with `config.host_rows` forced too, comma-separated: "
                        f"{', '.join(W2_WAYS)} (default: the planner's pick only)")
    parser.add_argument("--w2-processes", type=int, default=3,
                        help="fresh processes each for W2's compared pair (lazyfuel and torch to host)")
    parser.add_argument("--w2-child", default="", help=argparse.SUPPRESS)  # one W2 configuration (JSON)
    parser.add_argument("--resident-gib", type=float, default=16.0, help="W3/W4: size of resident x")
    parser.add_argument("--w4-rounds", type=int, default=0,
                        help="W4's interleaved rounds a side (default: --rounds, at least 10)")
    parser.add_argument("--same-process", action="store_true",
                        help="W3 / W4 in W1 / W2's process (default: a process of their own, first)")
    parser.add_argument("--w3-row-bytes", default="1024,64", help="W3's row sizes, bytes, in order")
    parser.add_argument("--resident-chunk-mib", type=int, default=1024, help="W3/W4: chunk size, MiB")
    args = parser.parse_args(argv)
    if args.w2_child:
        return w2_child(json.loads(args.w2_child))
    if args.quick:
        args.gib, args.mibs, args.threads, args.rounds, args.sweep_threads = 0.125, "8,16,32", 2, 1, ""
        args.w2_gib, args.w2_ids, args.w2_processes = "0.0625", 1 << 14, 2
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = sorted(set(workloads) - set(WORKLOADS))
    if unknown:
        parser.error(f"--workloads: unknown {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}")
    results: dict[str, Any] = {}
    apart = [w for w in workloads if w in RESIDENT]
    if apart and len(apart) < len(workloads) and not args.same_process:
        results["resident"] = resident_apart(argv if argv is not None else sys.argv[1:], apart)
        workloads = [w for w in workloads if w not in RESIDENT]
    from lazyfuel.backends.vulkan import register
    register()
    pool = get_pool()
    print(f"device: {pool.label} ({pool.info.kind}; driver {pool.info.driver} {pool.info.driver_info}); "
          f"transfer mode {pool.allocator.mode.value}; queues {len(pool.queues)}; {os.cpu_count()} CPUs; "
          f"numpy {np.__version__}{'; torch ' + torch.__version__ if torch is not None else ''}"
          f"{' (CUDA)' if CUDA else ''}; task_bytes {lf.config.task_bytes}; "
          f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}", flush=True)
    if args.alloc:
        allocation_costs(pool)
    for name in workloads:
        WORKLOADS[name](args, pool, results)
    messages = pool.validation_messages
    print(f"\nvalidation messages: {len(messages)}" + "".join(f"\n  {m}" for m in messages[:5]))
    if args.json:
        resident = results.pop("resident", None)
        found = {"resident": resident} if resident is not None else {}
        if results:
            found.update(gib=args.gib, threads=args.threads, results=results)
        with open(args.json, "w") as f:
            json.dump(found, f, indent=1, default=str)
    return 1 if messages or any(isinstance(r, dict) and r.get("failed") for r in results.values()) else 0


def resident(args: argparse.Namespace, pool: Any, results: dict[str, Any]) -> None:
    """W3 and W4 (`resident_workloads`), once for either or both, into `results["resident"]`."""
    if "resident" not in results:
        results["resident"] = resident_workloads(args, pool)


def w1(args: argparse.Namespace, pool: Any, results: dict[str, dict[str, Any]]) -> None:
    """W1 at every chunk size (see the module docstring), its rows printed and put in `results`."""
    x, mask = make_inputs(args.gib)
    out = np.zeros_like(x)
    x_pinned = out_pinned = None
    if not args.no_pinned:
        x_pinned = lf.empty_pinned(x.shape, x.dtype)
        np.copyto(x_pinned, x)
        out_pinned = lf.empty_pinned(x.shape, x.dtype)
        out_pinned[...] = 0
    tensors = torch_best_tensors(x, mask)
    if CUDA:
        torch.zeros(1 << 28, device="cuda").sum().item()  # the clocks up before timing
    mibs = [_mib(m) for m in args.mibs.split(",") if m]
    rows_out = []
    peers: dict[str, Measured] = {}
    for mib in mibs:
        chunk_rows = max(1, int(mib * 2**20) // (COLS * 4))
        idx = permutation(len(x), chunk_rows, chunk_rows)
        if not peers:
            peers = w1_peers(x, idx, mask, out, chunk_rows, max(1, args.rounds - 1))
        configs = configurations(x, mask, out, x_pinned, out_pinned, tensors, idx, chunk_rows, args)
        for name, make in configs.items():
            found = make()
            first, steady = found.cells(x.nbytes)
            link = (f"{found.extra['up'] / 2**20:.0f} / {found.extra['down'] / 2**20:.0f}"
                    if "up" in found.extra else "-")
            rows_out.append(f"| {mib} | {name} | {first} | {steady} | {link} |")
            results[f"{mib} {name}"] = {"first_s": found.first, "rounds_s": found.rounds, **found.extra}
            print(rows_out[-1], flush=True)
    print(f"\n### W1: {x.nbytes / 2**30:.2f} GiB f32 ({len(x)}, {COLS}), index_select (rows permuted within "
          f"chunks) + masked_fill, {args.threads} threads; GB/s of x, first (cold) and median (best) of "
          f"{args.rounds}\n")
    print("| chunk MiB | configuration | first | GB/s | MiB up / down per compute (lf.profile) |\n"
          "|---|---|---|---|---|")
    print("\n".join(rows_out))
    for name, found in peers.items():
        first, steady = found.cells(x.nbytes)
        print(f"| {mibs[0]} | {name} | {first} | {steady} | - |")
        results[name] = {"first_s": found.first, "rounds_s": found.rounds}
    sweep_threads = [int(t) for t in args.sweep_threads.split(",") if t]
    if sweep_threads:
        print(f"\n### lazyfuel pageable by dask threads (GB/s, median (best) of {args.rounds})\n")
        sweep_mibs = [_mib(m) for m in args.sweep_mibs.split(",") if m]
        header = " | ".join(f"{m} MiB" for m in sweep_mibs)
        print(f"| threads | {header} |\n|---|" + "---|" * len(sweep_mibs))
        for threads in sweep_threads:
            cells = []
            for mib in sweep_mibs:
                chunk_rows = max(1, int(mib * 2**20) // (COLS * 4))
                idx = permutation(len(x), chunk_rows, chunk_rows)
                found = lazyfuel_run(x, idx, mask, chunk_rows, threads, out, args.rounds)
                cells.append(found.cells(x.nbytes)[1])
                results[f"sweep {threads} {mib}"] = {"first_s": found.first, "rounds_s": found.rounds}
            print(f"| {threads} | " + " | ".join(cells) + " |", flush=True)


def allocation_costs(pool: Any, mibs: tuple[int, ...] = (64, 192, 1024), repeats: int = 3) -> None:
    """Prints the best of `repeats` ms to make (vkAllocateMemory, bind, map) and destroy one block
    of each memory use (`memtypes.Use`: the kernels' device memory, upload and download staging)."""
    from lazyfuel.backends.vulkan.memtypes import Use
    print("\n| block | " + " | ".join(f"{m} MiB make / destroy, ms" for m in mibs) + " |\n|---|"
          + "---|" * len(mibs))
    for use in Use:
        cells = []
        for mib in mibs:
            made, destroyed = [], []
            for _ in range(repeats):
                start = time.perf_counter()
                block = pool.allocator.make_block(mib << 20, use)
                middle = time.perf_counter()
                pool.allocator.destroy_block(block)
                made.append(middle - start)
                destroyed.append(time.perf_counter() - middle)
            cells.append(f"{min(made) * 1e3:.1f} / {min(destroyed) * 1e3:.1f}")
        print(f"| {use.name.lower()} | " + " | ".join(cells) + " |", flush=True)


def numpy_w1_threads(x: np.ndarray, idx: np.ndarray, mask: np.ndarray, out: np.ndarray,
                     chunk_rows: int) -> np.ndarray:
    """W1 in numpy into `out`, one chunk per task on every CPU (numpy releases the GIL)."""
    def one(start: int) -> None:
        rows = slice(start, min(start + chunk_rows, len(x)))
        np.take(x, idx[rows], axis=0, out=out[rows])
        np.copyto(out[rows], np.float32(-1), where=mask[rows])

    with ThreadPoolExecutor(CPUS) as pool:
        list(pool.map(one, range(0, len(x), chunk_rows)))
    return out


def torch_cpu_w1(t: dict[str, Any], idx: Any) -> Any:
    """W1 in torch on the CPU (its own threads: all of them), into t["out"]."""
    torch.index_select(t["x"], 0, idx, out=t["out"])
    return t["out"].masked_fill_(t["mask"], -1.0)


def cupy_best(c: dict[str, Any], chunk_rows: int) -> np.ndarray:
    """W1 in CuPy at its best: pinned host arrays, chunks round-robin on 3 streams, async copies."""
    n = len(c["x"])
    for k, start in enumerate(range(0, n, chunk_rows)):
        rows = slice(start, min(start + chunk_rows, n))
        with c["streams"][k % STREAMS]:
            g = cupy.asarray(c["x"][rows], blocking=False)
            i = cupy.asarray(c["idx"][rows], blocking=False) - start
            m = cupy.asarray(c["mask"][rows], blocking=False)
            y = cupy.where(m, cupy.float32(-1), cupy.take(g, i, axis=0))
            y.get(out=c["out"][rows], blocking=False)
    cupy.cuda.Device().synchronize()
    return c["out"]


def w1_peers(x: np.ndarray, idx: np.ndarray, mask: np.ndarray, out: np.ndarray, chunk_rows: int,
             n_rounds: int) -> dict[str, Measured]:
    """W1 on the CPU (numpy and torch on every thread) and in CuPy."""
    verify = partial(_check_as, x=x, idx=idx, mask=mask, chunk_rows=chunk_rows, who="a peer")
    found = {f"numpy on the CPU ({CPUS} threads)": measure(
                 partial(numpy_w1_threads, x, idx, mask, out, chunk_rows), n_rounds, verify)}
    if torch is not None:
        t = {"x": torch.from_numpy(x), "mask": torch.from_numpy(mask), "out": torch.empty(x.shape)}
        found[f"torch on the CPU ({torch.get_num_threads()} threads)"] = measure(
            partial(torch_cpu_w1, t, torch.from_numpy(idx)), n_rounds, verify)
    if cupy is not None and CUDA:
        c = {"x": cupyx.empty_pinned(x.shape, x.dtype), "idx": cupyx.empty_pinned(idx.shape, idx.dtype),
             "mask": cupyx.empty_pinned(mask.shape, mask.dtype), "out": cupyx.empty_pinned(x.shape, x.dtype),
             "streams": [cupy.cuda.Stream(non_blocking=True) for _ in range(STREAMS)]}
        c["x"][...], c["idx"][...], c["mask"][...] = x, idx, mask
        found["CuPy at its best (pinned, 3 streams)"] = measure(partial(cupy_best, c, chunk_rows), n_rounds,
                                                               verify)
    return found


def w2(args: argparse.Namespace, pool: Any, results: dict[str, dict[str, Any]]) -> None:
    """W2 (see the module docstring): each configuration in a fresh process, empty judge cache."""
    ways = [way for way in args.w2_ways.split(",") if way]
    configs = ["lazyfuel", "lazyfuel, compute(device=True)", *(f"lazyfuel, compute(device=True), {way}"
               for way in ways), f"numpy take ({CPUS} threads)"]
    if torch is not None:
        configs[2:2] = [f"torch CPU index_select ({torch.get_num_threads()} threads)"]
        if CUDA:
            configs.append("torch CPU index_select into pinned, then .cuda()")
    wanted = args.w2_only.split(",")  # prefixes; "=NAME" for exactly NAME
    configs = [name for name in configs
               if any(name == w[1:] if w.startswith("=") else name.startswith(w) for w in wanted)]
    rows_out = []
    sizes = [float(g) for g in args.w2_gib.split(",") if g]
    if configs and sizes:  # a fresh machine's first processes are slow whatever they run: one untimed
        _w2_in_child(args, sizes[0], configs[0])
    compared = [name for name in configs if w2_compared(name)]
    for gib in sizes:
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in configs}
        for k in range(max(args.w2_processes, 1)):  # the compared pair in turn, each first in turn
            turn = k % len(compared) if compared else 0
            for name in (configs if k == 0 else compared[turn:] + compared[:turn]):
                runs[name].append(_w2_in_child(args, gib, name))
        for name in configs:
            found = w2_merged(runs[name])
            results[f"w2 {gib} {name}"] = found
            if "failed" in found:
                print(f"W2 {gib} GiB, {name}: FAILED\n{found['failed']}", flush=True)
                continue
            link = (f"{found['up'] / 2**20:.0f} / {found['down'] / 2**20:.0f}" if "up" in found else "-")
            ms = f"{found['first_s'] * 1e3:.1f} | {found['again_s'] * 1e3:.1f}"
            each = " ".join(f"{t * 1e3:.0f}" for t in found.get("times_s", []))
            if len(found["firsts_s"]) > 1:
                each += f" (each process's first: {' '.join(f'{t * 1e3:.0f}' for t in found['firsts_s'])})"
            rows_out.append(f"| {gib:g} | {name} | {ms} | {each} | {link} | {found.get('picked', '-')} |")
            print(rows_out[-1], flush=True)
    print(f"\n### W2: {args.w2_ids} random int64 ids over a (rows, {W2_COLS}) f32 host table in {W2_CHUNKS} "
          "chunks, each configuration in a fresh process with an empty judge cache; ms of the first "
          f"compute, then the best of the rest; lazyfuel and torch CPU index_select to host in "
          f"{max(args.w2_processes, 1)} processes each, in turn: medians of the processes\n")
    print("| table GiB | configuration | first ms | again ms | every compute ms | MiB up / down (lf.profile) "
          "| planned |\n|---|---|---|---|---|---|---|")
    print("\n".join(rows_out))


def w2_compared(name: str) -> bool:
    """Whether W2 configuration `name` is one of the pair the acceptance compares (result to host:
    lazyfuel and torch CPU index_select), which run in `--w2-processes` processes each."""
    return name == "lazyfuel" or name.startswith("torch CPU index_select (")


def w2_merged(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One W2 configuration's processes as one result: the first process's fields, `first_s` and
    `again_s` the medians over the processes, `firsts_s` each process's first; a failure as it is."""
    failed = next((run for run in runs if "failed" in run), None)
    if failed is not None:
        return failed
    return {**runs[0], "first_s": statistics.median(run["first_s"] for run in runs),
            "again_s": statistics.median(run["again_s"] for run in runs),
            "firsts_s": [run["first_s"] for run in runs]}


def _w2_in_child(args: argparse.Namespace, gib: float, name: str) -> dict[str, Any]:
    """W2 configuration `name` over a `gib` GiB table in a fresh process with an empty judge cache:
    its timings, or {"failed": the output's tail}."""
    with tempfile.TemporaryDirectory(prefix="lazyfuel-judge-") as cache:
        env = {**os.environ, "LAZYFUEL_CACHE_DIR": cache, "LAZYFUEL_BACKEND": args.w2_backend}
        forced = [way for way in W2_WAYS if name.endswith(f", {way}")]
        if forced:  # the way the rows reach the device, forced (`config.host_rows`)
            env["LAZYFUEL_HOST_ROWS"] = forced[0]
        spec = json.dumps({"gib": gib, "ids": args.w2_ids, "config": name})
        done = subprocess.run([sys.executable, __file__, "--w2-child", spec], env=env,
                              capture_output=True, text=True, timeout=600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if done.returncode == 0 and lines else {
        "failed": (done.stdout + done.stderr)[-1500:]}


def w2_inputs(gib: float, n_ids: int) -> tuple[np.ndarray, np.ndarray]:
    """W2's host table, (rows, W2_COLS) f32 of `gib` GiB with rows that differ, and `n_ids`
    random int64 ids over its rows."""
    rows = max(W2_CHUNKS, int(gib * 2**30) // (W2_COLS * 4))
    table = np.empty((rows, W2_COLS), np.float32)
    tile = np.random.default_rng(3).standard_normal((min(rows, 8192), W2_COLS), dtype=np.float32)
    for start in range(0, rows, len(tile)):
        table[start:start + len(tile)] = tile[:rows - start]
    table[:, 0] = np.arange(rows, dtype=np.float32)  # rows differ
    return table, np.random.default_rng(4).integers(0, rows, n_ids, dtype=np.int64)


def w2_child(spec: dict[str, Any]) -> int:
    """One W2 configuration in this (fresh) process; prints its timings as one JSON line."""
    table, ids = w2_inputs(spec["gib"], spec["ids"])
    rows = len(table)
    name, found = spec["config"], {}
    if name.startswith("lazyfuel"):
        on_device = "device=True" in name
        y = lf.index_select(lf.from_array(table, chunks=(-(-rows // W2_CHUNKS), W2_COLS)), 0, ids)
        found["picked"] = planned(lf.explain(y, device=on_device))
        times, profiles, got = [], [], None
        for _ in range(W2_COMPUTES):
            with lf.profile() as p:
                start = time.perf_counter()
                got = y.compute(device=True) if on_device else y.compute()
                times.append(time.perf_counter() - start)
            profiles.append(p)
        got = np.asarray(got)
        found.update(up=profiles[0].bytes_uploaded, down=profiles[0].bytes_downloaded)
    else:
        run = w2_peer(name, table, ids)
        times = []
        for _ in range(W2_COMPUTES):
            start = time.perf_counter()
            got = run()
            times.append(time.perf_counter() - start)
        got = got.cpu().numpy() if torch is not None and isinstance(got, torch.Tensor) else got
    if got.tobytes() != table[ids].tobytes():
        raise SystemExit(f"W2 {name}: differs from numpy")
    print(json.dumps({**found, "first_s": times[0], "again_s": min(times[1:]), "times_s": times}))
    return 0


def w2_peer(name: str, table: np.ndarray, ids: np.ndarray) -> Callable[[], Any]:
    """The call that runs W2 peer `name` once."""
    if name.startswith("numpy take ("):
        out = np.empty((len(ids), table.shape[1]), table.dtype)
        step = -(-len(ids) // CPUS)

        def threaded() -> np.ndarray:
            with ThreadPoolExecutor(CPUS) as pool:
                list(pool.map(lambda a: np.take(table, ids[a:a + step], 0, out=out[a:a + step]),
                              range(0, len(ids), step)))
            return out
        return threaded
    t, i = torch.from_numpy(table), torch.from_numpy(ids)
    if name.startswith("torch CPU index_select ("):
        return partial(torch.index_select, t, 0, i)
    pinned = torch.empty((len(ids), table.shape[1]), dtype=torch.float32).pin_memory()

    def up() -> Any:
        torch.index_select(t, 0, i, out=pinned)
        got = pinned.to("cuda", non_blocking=True)
        torch.cuda.synchronize()
        return got
    return up


def planned(explained: str) -> str:
    """Where `lf.explain` says the first task group runs and how its source is read, in a few words."""
    lines = [line.strip() for line in explained.splitlines()]
    runs = next((line for line in lines if line.startswith("program on ")), "?").split(":")[0]
    read = next((line.split(" on ")[0] for line in lines if " read as it is " in line), "")
    chosen = [" ".join(line.lstrip("* ").split()) for line in lines if line.startswith("* ")][:1]
    kept = next((line.split(" (~")[0] for line in lines if line.startswith("result kept on ")), "")
    if "no program runs" in next((line for line in lines if line.startswith("result kept on ")), ""):
        return kept[:150]  # the rows streamed up: the program lines are the alternative
    return "; ".join(x for x in (runs, *chosen, read, kept) if x)[:150]


WORKLOADS: dict[str, Callable[[argparse.Namespace, Any, dict[str, Any]], None]] = {
    "w1": w1, "w2": w2, "w3": resident, "w4": resident}
RESIDENT = {"w3", "w4"}  # on the GPU: asked with host workloads, they run first in a process of their own


def resident_apart(argv: list[str], workloads: list[str]) -> dict[str, Any]:
    """W3 / W4 (`workloads`) in a fresh process of their own, before the host workloads, with this
    run's other arguments: after W1 in the same process, W3's 64-byte rows ran 12.3-13.4 ms where
    a process of their own ran 10.7 (decision 113). Its output goes to this one's; returns its
    results, or {"failed": ...} (its exit status) where it failed."""
    sys.stdout.flush()
    with tempfile.TemporaryDirectory(prefix="lazyfuel-data-path-") as folder:
        found = os.path.join(folder, "resident.json")
        done = subprocess.run([sys.executable, __file__, *argv, "--workloads", ",".join(workloads),
                               "--json", found], timeout=1800)
        resident: dict[str, Any] = {}
        if os.path.exists(found):
            with open(found) as f:
                resident = json.load(f).get("resident", {})
    if done.returncode != 0:
        resident["failed"] = f"the resident workloads' process exited with status {done.returncode}"
    return resident


def _check_as(got: Any, *, x: np.ndarray, idx: np.ndarray, mask: np.ndarray, chunk_rows: int,
              who: str) -> None:
    check(got.numpy() if torch is not None and isinstance(got, torch.Tensor) else got, x, idx, mask,
          chunk_rows, who)


def configurations(x: np.ndarray, mask: np.ndarray, out: np.ndarray, x_pinned: np.ndarray | None,
                   out_pinned: np.ndarray | None, tensors: dict[str, Any], idx: np.ndarray, chunk_rows: int,
                   args: argparse.Namespace) -> dict[str, Callable[[], Measured]]:
    """The configurations measured at one chunk size, each a call returning its `Measured`."""
    found: dict[str, Callable[[], Measured]] = {
        "lazyfuel, pageable": partial(lazyfuel_run, x, idx, mask, chunk_rows, args.threads, out, args.rounds)}
    if x_pinned is not None and out_pinned is not None:
        found["lazyfuel, page-locked"] = partial(lazyfuel_run, x_pinned, idx, mask, chunk_rows, args.threads,
                                                 out_pinned, args.rounds)
    if tensors:
        verify = partial(_check_as, x=x, idx=idx, mask=mask, chunk_rows=chunk_rows, who="torch")
        idx_pinned = torch.from_numpy(idx).pin_memory()
        found["torch at its best (pinned, 3 streams)"] = partial(
            measure, partial(torch_best_run, tensors, idx_pinned, chunk_rows), args.rounds, verify)
        naive = [int(m) for m in args.naive_mibs.split(",") if m]
        if not naive or chunk_rows * COLS * 4 >> 20 in naive:
            found["torch as first written (pageable)"] = partial(
                measure, partial(torch_naive, x, idx, mask, out, chunk_rows), args.rounds, verify)
    return found


def torch_best_tensors(x: np.ndarray, mask: np.ndarray) -> dict[str, Any]:
    """What `torch_best_run` reads and writes: x, mask and the result as pinned tensors and its
    CUDA streams ({} without CUDA)."""
    if not CUDA:
        return {}
    return {"x": torch.from_numpy(x).pin_memory(), "mask": torch.from_numpy(mask).pin_memory(),
            "out": torch.empty(x.shape, dtype=torch.float32).pin_memory(),
            "streams": [torch.cuda.Stream() for _ in range(STREAMS)]}


def torch_best_run(t: dict[str, Any], idx_pinned: Any, chunk_rows: int) -> Any:
    """torch at its best on the pinned tensors of `t` (see `torch_best`)."""
    n = t["x"].shape[0]
    for c, start in enumerate(range(0, n, chunk_rows)):
        rows = slice(start, min(start + chunk_rows, n))
        with torch.cuda.stream(t["streams"][c % STREAMS]):
            g = t["x"][rows].to("cuda", non_blocking=True)
            i = idx_pinned[rows].to("cuda", non_blocking=True) - start
            m = t["mask"][rows].to("cuda", non_blocking=True)
            t["out"][rows].copy_(g.index_select(0, i).masked_fill(m, -1.0), non_blocking=True)
    torch.cuda.synchronize()
    return t["out"]



# -- W3 / W4: resident data, results on the GPU, the torch hand-off (`--workloads w3,w4`) ----------
def resident_workloads(args: argparse.Namespace, pool: Any) -> dict[str, Any]:
    """W3 and W4 (issue 18), printed as two tables; the timings as a dict for `--json`.

    W3: x of `--resident-gib` GiB f32 resident on the GPU (`lf.from_array` of a CUDA tensor:
    device to device; without CUDA `persist(device=True)` of a host array), y = masked_fill(
    index_select(x, 0, idx), mask (N, 1), -1) with idx permuting rows inside each chunk, result left
    on the GPU (`y.persist(device=True)`: one block per chunk, each over maxMemoryAllocationSize
    otherwise), best of `--rounds`; TB/s = (x read + y written) / wall, beside torch index_select +
    masked_fill_ and CuPy take + copyto on the same resident tensors, for 1 KiB and 64-byte rows.
    W4 (run first): `torch.from_dlpack(y.compute(device=True))` of one chunk's result against the
    compute alone (interleaved, best and median of `--w4-rounds`, else `--rounds` and at least 10,
    each: `_w4`), no download in `lf.profile`, values bit-equal to torch's. Then the resident
    store's budget under 16 threads: persisted blocks spilling under a small budget end
    under it, bit-exact."""
    results: dict[str, Any] = {}
    gib = 1 / 16 if args.quick else args.resident_gib
    chunk_mib = 4 if args.quick else args.resident_chunk_mib
    rows_out: list[str] = []
    if "w4" in args.workloads:  # first: the shortest, so a call cut short still has it
        results["w4"] = _w4(pool, gib, chunk_mib, args.w4_rounds or max(args.rounds, 10))
        gc.collect()
    for row_bytes in [int(b) for b in args.w3_row_bytes.split(",")] if "w3" in args.workloads else ():
        results[f"w3 {row_bytes}"] = _w3(pool, gib, chunk_mib, row_bytes, max(args.rounds, 2), rows_out)
        gc.collect()  # x, its torch tensor and y go before the next
    if rows_out:
        print(f"\n### W3 resident: {gib:g} GiB f32 on the GPU, index_select (rows permuted within chunks "
          f"of {chunk_mib} MiB) + masked_fill, result on the GPU; TB/s of x read + y written, best of "
              f"{max(args.rounds, 2)}\n")
        print("| row bytes | configuration | ms | TB/s | vs torch | MiB up / down (lf.profile) |\n"
              "|---|---|---|---|---|---|")
        print("\n".join(rows_out))
    if "w4" in args.workloads:
        results["settle"] = _settle_under_threads(pool, 16)
    return results


def _resident_x(rows: int, cols: int, chunk_rows: int) -> tuple[Any, Any, np.ndarray | None]:
    """(lazyfuel x resident on the GPU, the torch tensor or None, the host array without CUDA)."""
    if CUDA:
        xt = torch.rand((rows, cols), device="cuda", dtype=torch.float32)
        xt[:, 0] = torch.arange(rows, device="cuda", dtype=torch.float32)
        torch.cuda.synchronize()
        return lf.from_array(xt, chunks=(chunk_rows, cols)), xt, None
    xh = np.random.default_rng(3).standard_normal((rows, cols)).astype(np.float32)
    return lf.from_array(xh, chunks=(chunk_rows, cols)).persist(device=True), None, xh


WARM_S = 1.5  # a GPU left idle drops to its idle clock (the H200: 345 MHz SM): run this long first


def _best(run: Callable[[], Any], rounds: int, warm_s: float = WARM_S,
          times: list[float] | None = None) -> tuple[float, Any]:
    """The best wall seconds of `rounds` runs (each synchronised) and the last run's value, after
    running it untimed for `warm_s` seconds back to back (the GPU at its working clock: W3's first
    H200 run timed 4-30 ms computes between seconds of host work, at a fraction of the clock);
    every round's seconds appended to `times` where given."""
    end = time.perf_counter() + warm_s
    while time.perf_counter() < end:
        got = None
        got = run()
        if CUDA:
            torch.cuda.synchronize()
    best, got = float("inf"), None
    for _ in range(rounds):
        got = None
        start = time.perf_counter()
        got = run()
        if CUDA:
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        best = min(best, seconds)
        if times is not None:
            times.append(seconds)
    return best, got


def _w3(pool: Any, gib: float, chunk_mib: int, row_bytes: int, rounds: int, rows_out: list[str]) -> dict:
    from lazyfuel.graph.resident import held_blocks

    cols = row_bytes // 4
    rows = int(gib * 2**30) // row_bytes
    chunk_rows = max(1, (chunk_mib << 20) // row_bytes)
    start = time.perf_counter()
    x, xt, xh = _resident_x(rows, cols, chunk_rows)
    made = time.perf_counter() - start
    idx = permutation(rows, chunk_rows, row_bytes)
    mask = np.random.default_rng(row_bytes).random((rows, 1)) < 0.5
    y = x.index_select(0, idx).masked_fill(mask, -1.0)
    nbytes = 2 * rows * row_bytes  # x read once, y written once
    first_row = len(rows_out)
    seconds, kept, p = _w3_timed(y, rounds)
    host = xh if xh is not None else None
    blocks = held_blocks(kept.to_dask())
    first_block = np.asarray(blocks[0])
    for c in sorted({0, len(blocks) // 2, len(blocks) - 1}):  # bit-equal with numpy
        lo, hi = c * chunk_rows, min((c + 1) * chunk_rows, rows)
        src = host[lo:hi] if host is not None else xt[lo:hi].cpu().numpy()
        want = np.where(mask[lo:hi], np.float32(-1), src[idx[lo:hi] - lo])
        if np.asarray(blocks[c]).tobytes() != want.tobytes():
            raise SystemExit(f"W3 {row_bytes} B rows: block {c} differs from numpy")
    del kept, blocks
    found = {"rows": rows, "x_made_s": made, "lazyfuel_s": seconds, "up": p.bytes_uploaded,
             "down": p.bytes_downloaded, "kernel_s": p.kernel_seconds, "device_s": p.device_seconds,
             "programs": p.programs, "submits": p.submits, "dispatches": p.dispatches,
             "bindings": dict(p.bindings)}
    print(f"W3 {row_bytes} B rows, last lazyfuel round: {p}", flush=True)  # which kernels ran, how long
    variants = _w3_variants(x, idx, mask, chunk_rows, rounds, first_block)
    found["variants"] = {name: {"s": s_, "up": p_.bytes_uploaded, "down": p_.bytes_downloaded,
                                "kernel_s": p_.kernel_seconds, "bindings": dict(p_.bindings)}
                         for name, (s_, p_) in variants.items()}
    torch_s = None
    if CUDA:
        idx_t = torch.from_numpy(idx).cuda()
        mask_t = torch.from_numpy(mask).cuda()
        torch_s, yt = _best(lambda: torch.index_select(xt, 0, idx_t).masked_fill_(mask_t, -1.0), rounds)
        if yt[:chunk_rows].cpu().numpy().tobytes() != first_block.tobytes():
            raise SystemExit(f"W3 {row_bytes} B rows: torch's first block differs from lazyfuel's")
        del yt
        found["torch_s"] = torch_s
        try:
            import cupy
        except ImportError:
            cupy = None
        if cupy is not None:
            xc, idc, mc = cupy.asarray(xt), cupy.asarray(idx_t), cupy.asarray(mask_t)

            def cupy_w3() -> Any:
                out = cupy.take(xc, idc, axis=0)
                cupy.copyto(out, cupy.float32(-1), where=mc)
                return out

            found["cupy_s"], _ = _best(cupy_w3, rounds)
            del xc, idc, mc
        x_gbs = rows * row_bytes / made / 1e9
        found["from_array_gbs"] = x_gbs
        del idx_t, mask_t
        torch.cuda.empty_cache()  # the next row size makes its own tensors
        if cupy is not None:
            cupy.get_default_memory_pool().free_all_blocks()
    link = f"{found['up'] / 2**20:.0f} / {found['down'] / 2**20:.0f}"
    vs = f"{torch_s / seconds:.2f}x" if torch_s else "-"
    rows_out.append(f"| {row_bytes} | lazyfuel persist(device=True) | {seconds * 1e3:.2f} | "
                    f"{nbytes / seconds / 1e12:.3f} | {vs} | {link} |")
    for name, (s_, p_) in variants.items():
        vs_ = f"{torch_s / s_:.2f}x" if torch_s else "-"
        rows_out.append(f"| {row_bytes} | lazyfuel, {name} | {s_ * 1e3:.2f} | {nbytes / s_ / 1e12:.3f} | "
                        f"{vs_} | "
                        f"{p_.bytes_uploaded / 2**20:.0f} / {p_.bytes_downloaded / 2**20:.0f} |")
    if torch_s:
        rows_out.append(f"| {row_bytes} | torch index_select + masked_fill_ (resident) | "
                        f"{torch_s * 1e3:.2f} | {nbytes / torch_s / 1e12:.3f} | 1.00x | - |")
    if "cupy_s" in found:
        c = found["cupy_s"]
        rows_out.append(f"| {row_bytes} | CuPy take + copyto (resident) | {c * 1e3:.2f} | "
                        f"{nbytes / c / 1e12:.3f} | {torch_s / c:.2f}x | - |")
    rows_out.append(f"| {row_bytes} | (x made resident by lf.from_array: {made * 1e3:.1f} ms, "
                    f"{rows * row_bytes / made / 1e9:.1f} GB/s) | | | | |")
    print("\n".join(rows_out[first_row:]), flush=True)
    return found


def _w3_timed(y: Any, rounds: int) -> tuple[float, Any, Any]:
    """(best wall seconds, the last round's kept result, its `lf.profile`) of `y.persist(device=True)`."""
    profiles = []

    def run() -> Any:
        with lf.profile() as p:
            kept = y.persist(device=True)
        profiles.append(p)
        return kept

    start = time.time()
    times: list[float] = []
    seconds, kept = _best(run, rounds, times=times)
    print(f"W3 timed from {start:.1f} to {time.time():.1f} (epoch s; for clock samples); every round ms: "
          f"{' '.join(f'{t * 1e3:.2f}' for t in times)} (median {statistics.median(times) * 1e3:.2f})",
          flush=True)
    return seconds, kept, profiles[-1]


def _w3_variants(x: Any, idx: np.ndarray, mask: np.ndarray, chunk_rows: int, rounds: int,
                 first_block: np.ndarray) -> dict[str, tuple[float, Any]]:
    """W3 beside the main row: {name: (best seconds, last round's profile)}, block 0 checked equal.
    - main's select_fill (`SelectFillKernel.row_walk` off: five runtime divisions per word), the
      same pipeline otherwise: the kernel fix before / after in one process;
    - select_fill reading the rows its mask fills too (`SelectFillKernel.skip_filled` off), as
      before session 11, with each position's loads in turn (`loads_first` off), and with each
      position reading its own mask byte (`mask_tile` off);
    - the mask resident too, as torch has it (a CUDA tensor through `lf.from_array`, chunks
      (chunk_rows, 1); without CUDA persisted): read in place, nothing uploaded per compute."""
    from lazyfuel.backends.vulkan.fill_kernels import SelectFillKernel
    from lazyfuel.graph.resident import held_blocks

    def timed(name: str, y: Any) -> None:
        seconds, kept, p = _w3_timed(y, rounds)
        if np.asarray(held_blocks(kept.to_dask())[0]).tobytes() != first_block.tobytes():
            raise SystemExit(f"W3 {name}: block 0 differs from the main row's")
        found[name] = (seconds, p)
        print(f"W3 {name}: {seconds * 1e3:.2f} ms; {p}", flush=True)

    found: dict[str, tuple[float, Any]] = {}
    SelectFillKernel.row_walk = False
    try:
        timed("general select_fill kernel (main's, before)", x.index_select(0, idx).masked_fill(mask, -1.0))
    finally:
        SelectFillKernel.row_walk = True
    for switch, name in (("skip_filled", "every row read, filled too (skip_filled off: before session 11)"),
                         ("loads_first", "loads in turn (loads_first off)"),
                         ("mask_tile", "mask bytes read by each position (mask_tile off)")):
        saved = getattr(SelectFillKernel, switch)
        setattr(SelectFillKernel, switch, False)
        try:
            timed(name, x.index_select(0, idx).masked_fill(mask, -1.0))
        finally:
            setattr(SelectFillKernel, switch, saved)
    # the default again, after it: the first timed row of a width ran 0.6-3.6 ms slower in the
    # first H200 calls of branch w3kern, whichever kernel it had (host-bound: an order effect)
    timed("row walk again (the default, timed after main's)", x.index_select(0, idx).masked_fill(mask, -1.0))
    kept_mask = (lf.from_array(torch.from_numpy(mask).cuda(), chunks=(chunk_rows, 1)) if CUDA
                 else lf.from_array(mask, chunks=(chunk_rows, 1)).persist(device=True))
    timed("mask (N, 1) resident too", x.index_select(0, idx).masked_fill(kept_mask, -1.0))
    return found


def _w4(pool: Any, gib: float, chunk_mib: int, rounds: int) -> dict:
    """W4: one chunk's result (one block: no assembly) on the GPU, handed to torch or not.

    x is `gib` GiB resident (`_resident_x`), y reads the rows of its first chunk. Three sides,
    interleaved round by round after a warm-up round of each (`_W4_WARM_S` s of load first):
    `compute(device=True)` alone;
    `torch.from_dlpack(compute(device=True))`; and the same with the previous round's tensor still
    alive while the next computes (what `_w4` measured before session 10). Between rounds nothing
    of the last round is alive on the first two sides (each result dropped before the next round
    starts, outside the timing); on the third, the previous tensor. Per side the best and median
    of `rounds`, and the exportable buffers made and CUDA imports done in its rounds
    (`SharedBuffers.made`, `ExternalBuffer.import_fd`)."""
    from lazyfuel.backends.vulkan.shared import buffers_of

    rows = int(gib * 2**30) // (COLS * 4)
    chunk_rows = max(1, (chunk_mib << 20) // (COLS * 4))
    x, xt, xh = _resident_x(rows, COLS, chunk_rows)
    idx = np.random.default_rng(4).permutation(chunk_rows).astype(np.int64)
    mask = np.random.default_rng(5).random((chunk_rows, 1)) < 0.5
    y = x.index_select(0, idx).masked_fill(mask, -1.0)
    src = xh[:chunk_rows] if xh is not None else xt[:chunk_rows].cpu().numpy()
    want = np.where(mask, np.float32(-1), src[idx])
    imports = _count_imports()
    buffers = buffers_of(pool)
    alive: list[Any] = [None]

    def alone() -> Any:
        return y.compute(device=True)

    def handed() -> Any:
        return torch.from_dlpack(y.compute(device=True))

    def handed_alive() -> Any:
        alive[0] = torch.from_dlpack(y.compute(device=True))  # the last one goes once this is made
        return alive[0]

    sides = {"compute(device=True) alone": alone}
    if CUDA:
        sides["torch.from_dlpack(compute(device=True))"] = handed
        sides["torch.from_dlpack(...), the last tensor alive"] = handed_alive
    runs: dict[str, list[float]] = {name: [] for name in sides}
    made = dict.fromkeys(sides, 0)
    imported = dict.fromkeys(sides, 0)
    last: list[Any] = [None]  # the last round's result, dropped before the next round starts
    with lf.profile() as p:
        end = time.perf_counter() + _W4_WARM_S
        while time.perf_counter() < end:
            last[0] = None
            last[0] = alone()
        for r in range(rounds + 1):  # the first round of each (warm-up) not counted
            for name, run in sides.items():
                last[0] = None  # nothing of the last round alive (the third side keeps its own)
                before_made, before_imports = buffers.made, imports[0]
                seconds, last[0] = _best(run, 1, 0.0)
                if r:
                    runs[name].append(seconds)
                    made[name] += buffers.made - before_made
                    imported[name] += imports[0] - before_imports
    alone_s = min(runs["compute(device=True) alone"])
    found: dict[str, Any] = {"rows": chunk_rows, "rounds": rounds,
                             "sides": {n: {"best_s": min(v), "median_s": statistics.median(v), "runs_s": v,
                                           "buffers_made": made[n], "cuda_imports": imported[n]}
                                       for n, v in runs.items()}}
    alone_median = statistics.median(runs["compute(device=True) alone"])
    lines = [f"| {n} | {min(v) * 1e3:.2f} | {statistics.median(v) * 1e3:.2f} | {min(v) / alone_s:.3f}x | "
             f"{statistics.median(v) / alone_median:.3f}x | {made[n]} / {imported[n]} |"
             for n, v in runs.items()]
    if CUDA:
        handed_s = found["sides"]["torch.from_dlpack(compute(device=True))"]
        # each hand-off round over the alone round just before it: the drift between rounds cancels
        alone_runs = runs["compute(device=True) alone"]
        paired = statistics.median([h / a for a, h in zip(alone_runs, handed_s["runs_s"])])
        r_ = y.compute(device=True)
        t = torch.from_dlpack(r_)
        same_memory = t.data_ptr() == r_.__cuda_array_interface__["data"][0]
        equal = t.cpu().numpy().tobytes() == want.tobytes()
        found.update(compute_s=alone_s, handoff_s=handed_s["best_s"], paired_median=paired,
                     down=p.bytes_downloaded, same_memory=same_memory, equal=equal, kind=r_.hand_off.kind)
        tail = (f"MiB down {p.bytes_downloaded / 2**20:.0f}; same memory {same_memory}; bit-equal {equal}; "
                f"best {handed_s['best_s'] / alone_s:.3f}x, "
                f"median {handed_s['median_s'] / alone_median:.3f}x, median of paired rounds {paired:.3f}x")
        del r_, t
    else:
        r_ = y.compute(device=True)
        found.update(compute_s=alone_s, kind=r_.hand_off.kind,
                     equal=np.from_dlpack(r_).tobytes() == want.tobytes())
        tail = f"hand-off {found['kind']}; bit-equal {found['equal']}"
        del r_
    alive[0] = last[0] = None
    print(f"\n### W4 torch hand-off: one {chunk_rows * COLS * 4 / 2**20:.0f} MiB block, {rounds} interleaved "
          f"rounds a side after a warm-up round each (between rounds nothing of the last round alive, "
          f"but on the third side the last tensor)\n\n| side | best ms | median ms | best vs alone | "
          f"median vs alone | buffers made / CUDA imports |\n|---|---|---|---|---|---|\n"
          + "\n".join(lines) + f"\n\n{tail}", flush=True)
    return found


_W4_WARM_S = 1.0  # load before W4's rounds: the GPU at its working clock


def _count_imports() -> list[int]:
    """A counter of CUDA imports of Vulkan memory (`ExternalBuffer.import_fd` wrapped), [0] where
    the vkfft provider's external module is missing."""
    count = [0]
    try:
        from lazyfuel.backends.vkfft import external
    except ImportError:
        return count
    real = external.ExternalBuffer.import_fd.__func__

    def import_fd(cls: Any, *args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return real(cls, *args, **kwargs)

    external.ExternalBuffer.import_fd = classmethod(import_fd)
    return count


def _settle_under_threads(pool: Any, threads: int) -> dict:
    """Persisted blocks under a budget of a quarter of them, computed by `threads` dask threads:
    the store ends under its budget and the blocks read back bit-exact (`ResidentStore.settle`)."""
    from lazyfuel.backends.vulkan.residency import store_of

    a = np.random.default_rng(6).standard_normal((threads * 16 * 1024, 256)).astype(np.float32)  # 256 blocks
    budget = a.nbytes // 4
    store = store_of(pool)
    worst = 0
    for _ in range(3):
        xp = lf.from_array(a, chunks=(1024, 256)).persist(device=True, device_memory_budget=budget,
                                                            scheduler="threads", num_workers=threads)
        worst = max(worst, store.device_bytes)
        equal = xp.compute(device_memory_budget=budget).tobytes() == a.tobytes()
        del xp
        gc.collect()
        if not equal:
            raise SystemExit("settle: persisted blocks differ from the host array")
    ok = worst <= budget
    print(f"\nresident store under {threads} threads: {a.nbytes / 2**20:.0f} MiB in 1 MiB blocks, budget "
          f"{budget / 2**20:.0f} MiB; most held after a persist {worst / 2**20:.1f} MiB "
          f"({'under' if ok else 'OVER'} the budget); bit-exact", flush=True)
    if not ok:
        raise SystemExit("settle: the store ended over its budget")
    return {"budget": budget, "worst": worst}


if __name__ == "__main__":
    sys.exit(main())
