"""Disk throughput by read size and reads in flight: what this disk gives `preadv` from Python
threads, the page cache dropped before each configuration (root) or bypassed (`--direct`,
`O_DIRECT`), so the default reads in flight (`byte_ranges.SPANS_IN_FLIGHT`, `file_spans`'s
threads) and the gap under which touched byte ranges are read through (`byte_ranges.GAP_BYTES`)
come from measurement (issue 19; "out_of_core, session 8" in ../BENCHMARKS.md).

Reads `--mb` MB per configuration from the files given (e.g. a raw store's chunk files), at
offsets that are multiples of the read size: `--pattern random` (the offsets shuffled, what
sparse touched rows ask of a disk) or `sequential` (each thread walks its own run of the files).
Prints MB/s and reads/s per (size, depth); `--json` writes them too.

    python benchmarks/probes/disk_depth.py /tmp/ooc3-bench/raw.zarr/c/*/0 --sizes 4K,64K,4M --depths 1,4,16
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from out_of_core import drop_caches  # the benchmark's own (benchmarks/)


def size_of(text: str) -> int:
    """'4K', '1M', '512' as bytes."""
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1].upper(), 1)
    return int(text[:-1] if scale > 1 else text) * scale


def plan(files: list[str], size: int, total: int, pattern: str, rng: np.random.Generator
         ) -> list[tuple[int, int]]:
    """(file number, offset) of each read: `total` bytes of `size`-byte reads."""
    lengths = [os.stat(f).st_size // size for f in files]
    slots = np.concatenate([np.stack([np.full(n, i), np.arange(n) * size], 1) for i, n in enumerate(lengths)])
    count = min(len(slots), max(1, total // size))
    if pattern == "random":
        picked = slots[np.sort(rng.choice(len(slots), count, replace=False))]
        rng.shuffle(picked)
    else:
        picked = slots[:count]
    return [(int(a), int(b)) for a, b in picked]


def run(files: list[str], reads: list[tuple[int, int]], size: int, depth: int, direct: bool,
        pattern: str) -> float:
    """Seconds to do `reads` with `depth` threads at once (each its own aligned buffer)."""
    flags = os.O_RDONLY | (os.O_DIRECT if direct else 0)
    fds = [os.open(f, flags) for f in files]
    if pattern == "sequential":  # each thread a contiguous run: depth streams
        per = -(-len(reads) // depth)
        shares = [reads[i * per:(i + 1) * per] for i in range(depth)]
    else:  # one shared queue: `depth` reads in flight at random offsets
        shares = [reads[i::depth] for i in range(depth)]

    def worker(share: list[tuple[int, int]]) -> None:
        buf = mmap.mmap(-1, size)  # page-aligned, as O_DIRECT wants
        for f, off in share:
            os.preadv(fds[f], [buf], off)
        buf.close()

    threads = [threading.Thread(target=worker, args=(s,)) for s in shares]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.perf_counter() - start
    for fd in fds:
        os.close(fd)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--sizes", default="4K,16K,64K,256K,1M,4M")
    parser.add_argument("--depths", default="1,2,4,8,16,32")
    parser.add_argument("--mb", type=float, default=256, help="MB read per configuration")
    parser.add_argument("--pattern", choices=("random", "sequential"), default="random")
    parser.add_argument("--direct", action="store_true", help="O_DIRECT (no page cache), not dropping it")
    parser.add_argument("--json")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    print(f"# {len(args.files)} files, {args.pattern}, {'O_DIRECT' if args.direct else 'buffered'}, "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"{'size':>6s} {'depth':>5s} {'MB/s':>8s} {'reads/s':>9s}")
    for size in (size_of(s) for s in args.sizes.split(",")):
        for depth in (int(d) for d in args.depths.split(",")):
            reads = plan(args.files, size, int(args.mb * 1e6), args.pattern, rng)
            if not args.direct and not drop_caches():
                raise SystemExit("cannot drop the page cache (not root): use --direct")
            took = run(args.files, reads, size, depth, args.direct, args.pattern)
            row = {"size": size, "depth": depth, "mb_s": len(reads) * size / 1e6 / took,
                   "reads_s": len(reads) / took, "load": os.getloadavg()[0]}
            rows.append(row)
            print(f"{size // 1024:5d}K {depth:5d} {row['mb_s']:8.0f} {row['reads_s']:9.0f}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
