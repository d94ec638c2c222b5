"""W2 on the GPU by piece size: the rows gathered into page-locked staging while earlier pieces upload.

Decided: the piece size and the pieces in flight of `lazyfuel/backends/vulkan/streamed.py`, and
where the time of `compute(device=True)` of W2 goes. In one warm process (the first compute
excluded): for each `--pieces` MiB x `--flights` pair, best and median ms of `--rounds` computes of
`index_select(x, 0, ids).compute(device=True)` (x a pageable (rows, 256) f32 table of `--gib` GiB
in 16 chunks, 1M random int64 ids), each result checked bit for bit on its first and last rows;
then the gather alone into page-locked memory (`hostcopy.take_rows` on all threads) and, where
torch sees CUDA, torch's `index_select` into a pinned tensor and `.cuda(non_blocking=True)`.

    python benchmarks/probes/w2_streamed.py [--gib 4] [--pieces 8,16,32] [--flights 2,3] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import lazyfuel as lf
from lazyfuel.backends.vulkan import streamed
from lazyfuel.hostcopy import take_rows

COLS, CHUNKS = 256, 16


def _timed(run, rounds: int) -> tuple[float, float]:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3, statistics.median(times) * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=4.0)
    parser.add_argument("--ids", type=int, default=1 << 20)
    parser.add_argument("--pieces", default="8,16,32", help="piece sizes, MiB")
    parser.add_argument("--flights", default="2,3", help="pieces in flight")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rows = int(args.gib * 2**30) // (COLS * 4)
    table = np.empty((rows, COLS), np.float32)
    tile = np.random.default_rng(3).standard_normal((8192, COLS), dtype=np.float32)
    for start in range(0, rows, len(tile)):
        table[start:start + len(tile)] = tile[:rows - start]
    table[:, 0] = np.arange(rows, dtype=np.float32)
    ids = np.random.default_rng(4).integers(0, rows, args.ids, dtype=np.int64)
    y = lf.index_select(lf.from_array(table, chunks=(-(-rows // CHUNKS), COLS)), 0, ids)
    want_first, want_last = table[ids[:1024]], table[ids[-1024:]]

    def run() -> None:
        got = y.compute(device=True)
        host = np.asarray(got)
        if host[:1024].tobytes() != want_first.tobytes() or host[-1024:].tobytes() != want_last.tobytes():
            raise SystemExit("differs from numpy")

    start = time.perf_counter()
    with lf.profile() as p:
        y.compute(device=True)
    print(f"first compute(device=True) {1e3 * (time.perf_counter() - start):.1f} ms; up "
          f"{p.bytes_uploaded / 2**20:.0f} MiB, down {p.bytes_downloaded / 2**20:.0f} MiB, "
          f"{p.submits} submits")
    print(lf.explain(y, device=True).split("costs compared")[0])
    run()  # checked once outside the timing
    print(f"| piece MiB | in flight | best ms | median ms | ({args.gib:g} GiB table, {args.ids} ids) |")
    print("|---|---|---|---|---|")
    for mib in (int(m) for m in args.pieces.split(",")):
        for flight in (int(f) for f in args.flights.split(",")):
            streamed.PIECE_BYTES, streamed.IN_FLIGHT = mib << 20, flight
            best, median = _timed(lambda: y.compute(device=True), args.rounds)
            print(f"| {mib} | {flight} | {best:.1f} | {median:.1f} | |", flush=True)
    pinned = lf.empty_pinned((args.ids, COLS), np.float32)
    best, median = _timed(lambda: take_rows(table, ids, pinned, "clip", split_min=0, piece=4 << 20),
                          args.rounds)
    print(f"gather alone into page-locked memory (all threads): best {best:.1f} ms, median {median:.1f}")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
