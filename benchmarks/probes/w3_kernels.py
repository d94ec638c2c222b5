"""Where W3's time goes on a GPU: resident x, index_select + masked_fill, result kept on the device.

The H200 run of `data_path.py --workloads w3` gave 0.81 TB/s at 1 KiB rows where the kernels alone
reach ~4.2 TB/s. This probe runs the same chain over resident blocks under each kernel choice the
planner has (`lf.config(pin_kernels=...)`: its own pick, the fused select_fill, the pair), with
the mask as a user gives it ((N, 1): read in place by the `*_broadcast` kernels,
`contracts/vulkan_broadcast.md`; on main it was widened on the device by a Contiguize step) and
already full ((N, C), resident: no upload). It prints the best round's `lf.profile` (dispatches,
kernel and device seconds, bindings) and TB/s of x read + y written; block 0 is checked bitwise.
`--fill-only` times the masked_fill of x alone (no select): what each mask form costs.

    python benchmarks/probes/w3_kernels.py --gib 4 --chunk-mib 1024 --row-bytes 1024,64
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import lazyfuel as lf
from lazyfuel.graph.resident import held_blocks

# each choice pins the kernels reading a contiguous mask and those reading a broadcast one in place
CHOICES = {"planner's pick": (), "select_fill": ("select_fill", "select_fill_broadcast"),
           "pair": ("index_select", "masked_fill", "masked_fill_broadcast")}


def run(gib: float, chunk_mib: int, row_bytes: int, rounds: int, choices: dict[str, tuple[str, ...]],
        fill_only: bool = False) -> None:
    cols = row_bytes // 4
    rows = int(gib * 2**30) // row_bytes
    chunk_rows = max(1, (chunk_mib << 20) // row_bytes)
    rng = np.random.default_rng(row_bytes)
    host = rng.standard_normal((rows, cols), dtype=np.float32)
    x = lf.from_array(host, chunks=(chunk_rows, cols)).persist(device=True)
    idx = np.concatenate([s + rng.permutation(min(chunk_rows, rows - s)) for s in range(0, rows, chunk_rows)])
    row_mask = rng.random((rows, 1)) < 0.5
    full = np.ascontiguousarray(np.broadcast_to(row_mask, (rows, cols)))
    column_mask = rng.random((1, cols)) < 0.5
    masks = {"mask (N, 1)": row_mask,  # as a user gives it: read in place (a broadcast view)
             "mask (1, C)": column_mask,
             "mask (N, C) resident": lf.from_array(full, chunks=(chunk_rows, cols)).persist(device=True)}
    for mask_name, mask in masks.items():
        small = column_mask if mask_name == "mask (1, C)" else row_mask[:chunk_rows]
        want = np.where(small, np.float32(-1), host[:chunk_rows] if fill_only else host[idx[:chunk_rows]])
        for choice, pins in choices.items():
            y = (x if fill_only else x.index_select(0, idx)).masked_fill(mask, -1.0)
            best, last = float("inf"), None
            with lf.config(pin_kernels=pins):
                end = time.perf_counter() + 1.0  # back to back first: the GPU at its working clock
                while time.perf_counter() < end:
                    y.persist(device=True)
                for _ in range(rounds):
                    with lf.profile() as p:
                        start = time.perf_counter()
                        kept = y.persist(device=True)
                        seconds = time.perf_counter() - start
                    if seconds < best:
                        best, last = seconds, p
                    if np.asarray(held_blocks(kept.to_dask())[0]).tobytes() != want.tobytes():
                        raise SystemExit(f"{row_bytes} B rows, {mask_name}, {choice}: block 0 differs")
                    del kept
            tb = 2 * rows * row_bytes / best / 1e12
            print(f"{row_bytes} B rows | {mask_name} | {choice}: best {best * 1e3:.2f} ms, {tb:.3f} TB/s; "
                  f"best round: {last}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=4.0)
    parser.add_argument("--chunk-mib", type=int, default=1024)
    parser.add_argument("--row-bytes", default="1024,64")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--choices", default=",".join(CHOICES), help=f"of {', '.join(CHOICES)}")
    parser.add_argument("--fill-only", action="store_true", help="masked_fill of x alone, no select")
    args = parser.parse_args()
    choices = {name: CHOICES[name] for name in args.choices.split(",")}
    # warm the GPU past its idle clock before timing anything
    warm = lf.from_array(np.ones((1 << 16, 256), np.float32), chunks=(1 << 14, 256)).persist(device=True)
    end = time.perf_counter() + 1.5
    while time.perf_counter() < end:
        warm.masked_fill(np.zeros((1 << 16, 1), bool), 0.0).persist(device=True)
    for row_bytes in (int(b) for b in args.row_bytes.split(",")):
        run(args.gib, args.chunk_mib, row_bytes, args.rounds, choices, args.fill_only)


if __name__ == "__main__":
    main()
