"""W2's rows read by a kernel from the host table in place, by row size, beside the streamed way.

Decided: the read granule of `judge.costs.READ_GRANULE` and whether the in-place read
(`lazyfuel/backends/vulkan/host_gather.py`) beats the streamed one (`streamed.py`) on this device.
In one warm process, over one pageable f32 table of `--gib` GiB seen as rows of each `--rows`
bytes: the first `gather_in_place` (it imports the table's segments), then best and median ms of
`--rounds` more for each `--shapes` launch shape of the `host_gather` family (workgroup x words
per invocation), the link's GB/s of result bytes, and `streamed.gather_up` of the same rows;
each result checked bit for bit on its first and last rows against numpy. Last, the fastest
shape at 1 KiB rows (W2's) as `best host_gather shape: AxB`. `--orders random,sorted` reads the
same ids in each order (issue 18 W2: whether the link's rate for random 1 KiB rows over 4 KiB host
pages, ~33 GB/s of 55, is capped by the order of the reads: IOMMU/TLB and DRAM page misses).

    python benchmarks/probes/w2_in_place.py [--gib 4] [--rows 4,64,256,1024,4096] [--result-mib 1024]
        [--shapes 64x4,64x16] [--orders random] [--no-streamed]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from lazyfuel.backends.vulkan import get_pool
from lazyfuel.backends.vulkan.host_gather import gather_in_place
from lazyfuel.backends.vulkan.streamed import gather_up

sys.path.insert(0, os.path.dirname(__file__))
from w2_streamed import _timed  # best and median ms: the streamed probe's timer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=4.0)
    parser.add_argument("--rows", default="4,64,256,1024,4096", help="row sizes, bytes")
    parser.add_argument("--result-mib", type=int, default=1024, help="result size, MiB")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--shapes", default="",
                        help="host_gather launch shapes, e.g. 64x4,64x16 (default: the pool's)")
    parser.add_argument("--orders", default="random", help="the ids' orders: random, sorted")
    parser.add_argument("--no-streamed", action="store_true", help="leave the streamed way out")
    args = parser.parse_args()
    pool = get_pool()
    words = int(args.gib * 2**30) // 4
    table = np.empty(words, np.float32)
    table[:] = np.arange(words, dtype=np.float32)  # distinct-ish values
    print(f"{pool.label}, kind {pool.info.kind}, maxMemoryAllocationSize "
          f"{pool.info.max_memory_allocation_size >> 20} MiB, {args.gib:g} GiB table")
    default = pool.groups["host_gather"]
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",") if s] or [default]
    print("| row bytes | ids | first ms (imports) | shape | in place best / median ms | GB/s "
          "| streamed best / median ms | GB/s | in place / streamed |")
    print("|---|---|---|---|---|---|---|---|---|")
    at_w2: dict[tuple[int, int], float] = {}
    orders = [o for o in args.orders.split(",") if o]
    for row, order in ((int(r), o) for r in args.rows.split(",") for o in orders):
        source = table.reshape(-1, row // 4)
        count = min((args.result_mib << 20) // row, len(source))
        ids = np.random.default_rng(row).integers(0, len(source), count, dtype=np.int64)
        if order == "sorted":
            ids = np.sort(ids)
        want = (source[ids[:256]].tobytes(), source[ids[-256:]].tobytes())

        def check(block, want=want, row=row) -> None:
            host = np.asarray(block)
            if (host[:256].tobytes(), host[-256:].tobytes()) != want:
                raise SystemExit(f"rows of {row} bytes differ from numpy")

        start = time.perf_counter()
        block = gather_in_place(pool, source, ids)
        first = (time.perf_counter() - start) * 1e3
        if block is None:
            print(f"| {row} | {order} | not readable in place here | | | | | |")
            continue
        check(block)
        del block
        sbest = smedian = float("nan")
        if not args.no_streamed:
            check(gather_up(pool, source, ids))
            sbest, smedian = _timed(lambda s=source, i=ids: gather_up(pool, s, i), args.rounds)
        nbytes = count * row
        for shape in shapes:
            pool.groups["host_gather"] = shape
            check(gather_in_place(pool, source, ids))
            best, median = _timed(lambda s=source, i=ids: gather_in_place(pool, s, i), args.rounds)
            if row == 1024 and order == orders[0]:
                at_w2[shape] = best
            print(f"| {row} | {order} | {first:.1f} | {shape[0]}x{shape[1]} | {best:.1f} / {median:.1f} | "
                  f"{nbytes / best / 1e6:.1f} | {sbest:.1f} / {smedian:.1f} | {nbytes / sbest / 1e6:.1f} | "
                  f"{best / sbest:.2f}x |", flush=True)
        pool.groups["host_gather"] = default
    if at_w2:
        fastest = min(at_w2, key=at_w2.get)
        print(f"best host_gather shape: {fastest[0]}x{fastest[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
