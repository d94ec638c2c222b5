"""GB/s of x through one lazy program per chunk on page-locked arrays, per op and transfer mode.

Asks what a kernel that reads and writes host memory moves over the link, against the copy
engines' path (`staged`: DMA in, kernel, DMA out). x is `--gib` GiB of f32 (N, 1024) in
`--chunk-mib` row chunks, in page-locked memory (`lf.empty_pinned`), and so is the reused result
(`compute(out=)`, `--threads` threads). Ops: `select` (index_select permuting each chunk's rows),
`fill` (masked_fill with an (N, 1) mask), `select+fill` (both: one `select_fill` dispatch on GPUs,
decision 46), `reverse-copy` (`contiguous(x[:, ::-1])`). Every result is checked against numpy
on three chunks. Launch shapes and queues come from the environment (`LAZYFUEL_VULKAN_GROUPS`,
`LAZYFUEL_VULKAN_QUEUES`), as a pool reads them.

    python benchmarks/probes/zero_copy.py --gib 4 --chunk-mib 64
    python benchmarks/probes/zero_copy.py --ops select+fill --modes zero-copy --tag "8 queues"
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))  # the repository root
sys.path.insert(0, os.path.dirname(__file__))
os.environ.setdefault("LAZYFUEL_BACKEND", "vulkan")

import transfer  # this folder's transfer benchmark: its input and pinned helpers

import lazyfuel as lf
from lazyfuel.backends.vulkan import get_pool
from lazyfuel.backends.vulkan.memtypes import Mode

OPS = ("select", "fill", "select+fill", "reverse-copy")


def lazy(op: str, x: np.ndarray, idx: np.ndarray, mask: np.ndarray, rows: int) -> lf.Array:
    src = lf.from_array(x, chunks=(rows, transfer.COLS))
    if op == "select":
        return lf.index_select(src, 0, idx)
    if op == "fill":
        return lf.masked_fill(src, mask, -1.0)
    if op == "select+fill":
        return lf.masked_fill(lf.index_select(src, 0, idx), mask, -1.0)
    return lf.contiguous(src[:, ::-1])


def reference(op: str, x: np.ndarray, idx: np.ndarray, mask: np.ndarray, rows: slice) -> np.ndarray:
    if op == "select":
        return x[idx[rows]]
    if op == "fill":
        return np.where(mask[rows], np.float32(-1), x[rows])
    if op == "select+fill":
        return np.where(mask[rows], np.float32(-1), x[idx[rows]])
    return x[rows, ::-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib", type=float, default=4.0)
    parser.add_argument("--chunk-mib", type=int, default=64)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--modes", default="zero-copy,staged")
    parser.add_argument("--tag", default="", help="a label printed on every line")
    args = parser.parse_args(argv)
    pool = get_pool()
    rows = max(1, (args.chunk_mib << 20) // (transfer.COLS * 4))
    x, idx, mask = transfer.make_input(args.gib, rows)
    xp = transfer.pinned_copy(x)
    out = lf.empty_pinned(x.shape, x.dtype)
    out[...] = 0
    print(f"# {pool.info.name}; {x.nbytes / 2**30:.2f} GiB in {x.shape[0] // rows} chunks of {rows} rows, "
          f"{args.threads} threads, {len(pool.queues)} queues; median (best) of {args.rounds}; GB/s of x")
    for mode in (Mode(m) for m in args.modes.split(",")):
        for op in args.ops.split(","):
            def run(op: str = op, mode: Mode = mode) -> float:
                with transfer.kept_mode(pool, mode):
                    y = lazy(op, xp, idx, mask, rows)
                    start = time.perf_counter()
                    y.compute(out=out, scheduler="threads", num_workers=args.threads)
                    return time.perf_counter() - start
            run()
            for c in sorted({0, x.shape[0] // rows // 2, x.shape[0] // rows - 1}):
                part = slice(c * rows, (c + 1) * rows)
                if out[part].tobytes() != reference(op, x, idx, mask, part).tobytes():
                    raise SystemExit(f"{mode.value} {op}: chunk {c} differs from numpy")
            times = [run() for _ in range(args.rounds)]
            print(f"{args.tag} {mode.value} {op}: {transfer.cell(x.nbytes, times)} GB/s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
