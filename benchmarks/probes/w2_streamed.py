"""W2 on the GPU, the streamed way: where its time goes, by threads, staging memory, pieces in flight.

Decides: `lazyfuel/backends/vulkan/streamed.py`'s `PIECE_BYTES` and `IN_FLIGHT` (main's runs of
4 MiB, 4 threads a 16 MiB piece; the variants measured slower on the H200, `PIPELINED` pieces
queued ahead on every copy thread and host-cached staging, are gone: branch `w2again`), the
staging memory type the gather writes fastest, and where the first compute's time goes. In one process (x a
pageable (rows, 256) f32 table of `--gib` GiB in 16 chunks, 1M random int64 ids, every result
checked bit for bit on its first and last rows):

1. the pool made by `lf.explain(y, device=True)` (timed), then the first `compute(device=True)`
   with the rows streamed, under cProfile on dask's synchronous scheduler (cProfile sees one
   thread): its wall and the functions that took the most time;
2. `take_rows` alone of 1 GiB on every copy thread into host-cached page-locked memory and into
   the write-combined upload type (the staging memory's part);
3. `streamed.gather_up` alone (one 1 GiB block) and the whole `compute(device=True)` streamed
   (4 tasks), best / median of `--rounds`, for each variant;
4. the table imported, `host_gather.gather_in_place` alone: one 1 GiB block, and 4 blocks of a
   quarter each on 4 threads (as the compute's 4 tasks); cProfile of a warm compute each way
   (streamed, in place; synchronous): the per-compute overhead;
5. where torch sees CUDA, torch's CPU `index_select` into a pinned tensor and `.cuda()`;
6. (`--fresh N`) N pairs of fresh processes, each: the pool made by `lf.explain`, then (one of each
   pair) the staging pieces of 4 tasks page-locked untimed (what moving that to pool creation
   would save), then the first and second `compute(device=True)` streamed, on dask's threads.

    python benchmarks/probes/w2_streamed.py [--gib 4] [--pieces 16,32] [--flights 2,3]
        [--rounds 5] [--fresh 1]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import lazyfuel as lf
from lazyfuel.backends.vulkan import get_pool, host_gather, streamed
from lazyfuel.hostcopy import take_rows, workers

COLS, CHUNKS = 256, 16


def _timed(run: Callable[[], object], rounds: int) -> tuple[float, float]:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3, statistics.median(times) * 1e3


def _profiled(label: str, run: Callable[[], object], lines: int) -> None:
    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.enable()
    run()
    profile.disable()
    wall = (time.perf_counter() - start) * 1e3
    text = io.StringIO()
    stats = pstats.Stats(profile, stream=text)
    stats.sort_stats("cumulative").print_stats(lines)
    stats.sort_stats("tottime").print_stats(lines)
    print(f"--- {label}: {wall:.1f} ms under cProfile\n" + "\n".join(
        line for line in text.getvalue().splitlines() if line.strip() and "{built-in method builtins.exec}"
        not in line)[:9000], flush=True)


def _table(gib: float) -> np.ndarray:
    """A pageable (rows, 256) f32 table of `gib` GiB, its rows distinct (the first column numbers them)."""
    rows = int(gib * 2**30) // (COLS * 4)
    table = np.empty((rows, COLS), np.float32)
    tile = np.random.default_rng(3).standard_normal((8192, COLS), dtype=np.float32)
    for start in range(0, rows, len(tile)):
        table[start:start + len(tile)] = tile[:rows - start]
    table[:, 0] = np.arange(rows, dtype=np.float32)
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=4.0)
    parser.add_argument("--ids", type=int, default=1 << 20)
    parser.add_argument("--pieces", default="16,32", help="piece sizes, MiB")
    parser.add_argument("--flights", default="2,3", help="pieces in flight")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile-lines", type=int, default=22)
    parser.add_argument("--fresh", type=int, default=1, help="pairs of fresh processes for the first compute")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)  # "plain" or "prewarm"
    args = parser.parse_args()
    if args.child:
        return _fresh_child(args)
    table = _table(args.gib)
    rows = len(table)
    ids = np.random.default_rng(4).integers(0, rows, args.ids, dtype=np.int64)
    y = lf.index_select(lf.from_array(table, chunks=(-(-rows // CHUNKS), COLS)), 0, ids)
    want_first, want_last = table[ids[:1024]].tobytes(), table[ids[-1024:]].tobytes()

    def check(got: object) -> None:
        host = np.asarray(got)
        if host[:1024].tobytes() != want_first or host[-1024:].tobytes() != want_last:
            raise SystemExit("differs from numpy")

    start = time.perf_counter()
    explained = lf.explain(y, device=True)
    print(f"lf.explain (makes the pool, probes the link): {1e3 * (time.perf_counter() - start):.1f} ms; "
          f"{workers()} copy threads")
    print(explained.split("costs compared")[0])
    with lf.config(host_rows="streamed"):
        _profiled("first compute(device=True), streamed, on dask's synchronous scheduler (cProfile sees "
                  "one thread)", lambda: check(y.compute(device=True, scheduler="sync")), args.profile_lines)
        start = time.perf_counter()
        check(y.compute(device=True))
        print(f"second compute(device=True), streamed: {1e3 * (time.perf_counter() - start):.1f} ms")

    pool = get_pool()
    nbytes = args.ids * COLS * 4
    cached = lf.empty_pinned((args.ids, COLS), np.float32)
    wc_alloc = pool.allocator.alloc(nbytes, staging=True)
    wc = wc_alloc.host[:nbytes].view(np.float32).reshape(args.ids, COLS)
    print(f"\n| take_rows alone, {nbytes / 2**30:g} GiB, {workers()} threads, into | best ms | median ms "
          "| GB/s |\n|---|---|---|---|")
    memories = (("host-cached page-locked (lf.empty_pinned)", cached), ("write-combined upload staging", wc))
    for name, out in memories:
        best, median = _timed(lambda o=out: take_rows(table, ids, o, "clip", 0, 256 << 10),
                              args.rounds)
        print(f"| {name} | {best:.1f} | {median:.1f} | {nbytes / best / 1e6:.1f} |", flush=True)
        if out[:4].tobytes() != table[ids[:4]].tobytes():
            raise SystemExit("take_rows differs")
    pool.allocator.free(wc_alloc)
    del cached

    knobs = ("PIECE_BYTES", "IN_FLIGHT")
    defaults = {k: getattr(streamed, k) for k in knobs}
    print("\n| pieces | staging | piece MiB | in flight | gather_up alone best / median ms | GB/s "
          "| compute(device=True) streamed best / median ms |\n|---|---|---|---|---|---|---|")
    sizes, flights = [int(m) for m in args.pieces.split(",")], [int(f) for f in args.flights.split(",")]
    with lf.config(host_rows="streamed"):
        for mib, flight in [(mib, flight) for mib in sizes for flight in flights]:
            for k, v in zip(knobs, (mib << 20, flight)):
                setattr(streamed, k, v)

            def alone() -> None:
                streamed.gather_up(pool, table, ids).free()
            alone()
            a_best, a_med = _timed(alone, args.rounds)
            check(y.compute(device=True))
            c_best, c_med = _timed(lambda: y.compute(device=True), args.rounds)
            runs = f"runs of {streamed.RUN_BYTES >> 20} MiB (main)"
            print(f"| {runs} | write-combined | {mib} | {flight} | {a_best:.1f} / {a_med:.1f} "
                  f"| {nbytes / a_best / 1e6:.1f} | {c_best:.1f} / {c_med:.1f} |", flush=True)
    for k, v in defaults.items():
        setattr(streamed, k, v)

    first = host_gather.gather_in_place(pool, table, ids)  # imports the table (kept while it lives)
    assert first is not None, "this device cannot read the table in place"
    first.free()
    quarter = -(-len(ids) // 4)
    parts = [ids[k:k + quarter] for k in range(0, len(ids), quarter)]
    print(f"\n| read in place, the table imported | one {nbytes / 2**30:g} GiB block best / median ms | GB/s "
          "| 4 blocks on 4 threads best / median ms | GB/s |\n|---|---|---|---|---|")

    def one(part: np.ndarray = ids) -> None:
        block = host_gather.gather_in_place(pool, table, part)
        assert block is not None
        block.free()
    with ThreadPoolExecutor(4) as threads:
        b1, m1 = _timed(one, args.rounds)
        b4, m4 = _timed(lambda: list(threads.map(one, parts)), args.rounds)
    print(f"| the kernel alone | {b1:.1f} / {m1:.1f} | {nbytes / b1 / 1e6:.1f} | {b4:.1f} / {m4:.1f} "
          f"| {nbytes / b4 / 1e6:.1f} |", flush=True)

    for way in ("streamed", "in-place"):
        with lf.config(host_rows=way):
            check(y.compute(device=True))
            best, median = _timed(lambda: y.compute(device=True), args.rounds)
            print(f"\nwarm compute(device=True), {way}: best {best:.1f} ms, median {median:.1f}")
            _profiled(f"warm compute(device=True), {way}, synchronous scheduler",
                      lambda: y.compute(device=True, scheduler="sync"), args.profile_lines)
    for _ in range(args.fresh):
        for how in ("plain", "prewarm"):
            done = subprocess.run([sys.executable, __file__, "--gib", str(args.gib), "--ids", str(args.ids),
                                   "--child", how], capture_output=True, text=True, timeout=120)
            print(f"fresh process, {how}: {(done.stdout.strip() or done.stderr[-800:])}", flush=True)
    try:
        import torch
    except ImportError:
        return 0
    if torch.cuda.is_available():
        t, i = torch.from_numpy(table), torch.from_numpy(ids)
        out = torch.empty((args.ids, COLS), dtype=torch.float32).pin_memory()

        def up() -> None:
            torch.index_select(t, 0, i, out=out)
            out.to("cuda", non_blocking=True)
            torch.cuda.synchronize()
        up()
        best, median = _timed(up, args.rounds)
        print(f"torch CPU index_select into pinned, then .cuda(): best {best:.1f} ms, median {median:.1f}")
        best, median = _timed(lambda: torch.index_select(t, 0, i, out=out), args.rounds)
        print(f"torch CPU index_select into pinned alone: best {best:.1f} ms, median {median:.1f}")
    return 0


def _fresh_child(args: argparse.Namespace) -> int:
    """One fresh process: the pool, the staging of 4 tasks' pieces in flight page-locked untimed
    (`--child prewarm`) or not, then the first and second `compute(device=True)` streamed."""
    table = _table(args.gib)
    rows = len(table)
    ids = np.random.default_rng(4).integers(0, rows, args.ids, dtype=np.int64)
    y = lf.index_select(lf.from_array(table, chunks=(-(-rows // CHUNKS), COLS)), 0, ids)
    lf.explain(y, device=True)
    pool = get_pool()
    start = time.perf_counter()
    if args.child == "prewarm":
        held = [pool.allocator.alloc(streamed.PIECE_BYTES, staging=True)
                for _ in range(4 * streamed.IN_FLIGHT)]
        for allocation in held:
            pool.allocator.free(allocation)
    warm_ms = (time.perf_counter() - start) * 1e3
    times = []
    with lf.config(host_rows="streamed"):
        for _ in range(2):
            start = time.perf_counter()
            got = y.compute(device=True)
            times.append((time.perf_counter() - start) * 1e3)
    if np.asarray(got)[-16:].tobytes() != table[ids[-16:]].tobytes():
        raise SystemExit("differs from numpy")
    print(f"staging page-locked beforehand {warm_ms:.1f} ms; first compute {times[0]:.1f} ms, "
          f"second {times[1]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
