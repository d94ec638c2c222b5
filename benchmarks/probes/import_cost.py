"""What importing host memory costs per chunk (VK_EXT_external_memory_host), by thread count.

The H200 pipeline in `transfer.py` moves ~5.6 GB/s whatever the chunk size or thread count, while
one 1 GiB import round trip moves 9.8. This times the import alone: `allocator.import_host` (the
driver pins the pages) and `free` (it unpins them) of `--mib` chunks of one big, touched array,
`--chunks` of them spread over 1, 4 and 16 threads, no GPU work. If the aggregate rate stays flat
as threads grow, the driver serialises pinning, and a pipeline that imports every chunk on every
run is bound by it (then: register each host array once and reuse the import).

    python benchmarks/probes/import_cost.py --mib 64 --chunks 64
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))  # the repository root

from lazyfuel.backends.vulkan import get_pool, register


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--chunks", type=int, default=64)
    parser.add_argument("--threads", default="1,4,16")
    args = parser.parse_args()
    register()
    pool = get_pool()
    allocator = pool.allocator
    if allocator.imports is None:
        raise SystemExit(f"{pool.label} cannot import host memory")
    chunk = args.mib << 20
    host = np.ones(chunk * args.chunks, np.uint8)  # touched: no page faults inside the timing
    pieces = [host[i * chunk:(i + 1) * chunk] for i in range(args.chunks)]

    def one(piece: np.ndarray) -> tuple[float, float]:
        t0 = time.perf_counter()
        found = allocator.import_host(piece)
        t1 = time.perf_counter()
        if found is None:
            raise SystemExit("the driver refused the import")
        allocator.free(found)
        return t1 - t0, time.perf_counter() - t1

    one(pieces[0])  # warm-up
    print(f"# {pool.label}; {args.chunks} chunks of {args.mib} MiB ({host.nbytes / 2**30:.2f} GiB)")
    print("| threads | wall s | GB/s imported and freed | import ms per chunk (median) | free ms (median) |")
    print("|---|---|---|---|---|")
    for threads in (int(t) for t in args.threads.split(",")):
        start = time.perf_counter()
        with ThreadPoolExecutor(threads) as workers:
            times = list(workers.map(one, pieces))
        wall = time.perf_counter() - start
        imp = sorted(t[0] for t in times)[len(times) // 2] * 1e3
        fre = sorted(t[1] for t in times)[len(times) // 2] * 1e3
        print(f"| {threads} | {wall:.3f} | {host.nbytes / wall / 1e9:.2f} | {imp:.2f} | {fre:.2f} |")


if __name__ == "__main__":
    main()
