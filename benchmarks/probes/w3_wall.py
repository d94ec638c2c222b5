"""Where W3's wall time goes between programs: resident x, index_select + masked_fill, result kept.

Decided: whether the wall time of a compute over resident blocks (issue 18's W3) beyond its
kernels goes to fresh device allocations (vkAllocateMemory per result block), recording
contexts (command pools, fences), uploads of the indices and masks, the Python per task under the
GIL, or the scheduler. Prints, per configuration and round: wall ms, programs, submits, device
ms (submit to fence) and kernel ms from `lf.profile`, bytes up / down, new device memory blocks
(`VulkanAllocator._new_unlocked` calls: vkAllocateMemory) and new recording contexts made during the
compute; then the top functions by own time of one compute on the synchronous scheduler
(cProfile). Modes: `main` (`kept_indices=0`: every compute uploads its indices, as main did),
`kept` (the default: several blocks per task and program, `graph.batched`), `mask resident` (the
(N, 1) mask persisted too), `per block` (`device_task_bytes=0`: one task and program per block).
Where CUDA shares the GPU (the H200), x is made by torch and copied device to device (as
data_path.py's W3) and torch's index_select + masked_fill_ on the resident tensors is timed beside.

    python benchmarks/probes/w3_wall.py [--mib 64] [--chunk-mib 4] [--row-bytes 1024,64]
        [--rounds 3] [--threads 1,4,16] [--modes main,kept,mask resident] [--warm-s 1] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import pstats
import sys
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
os.environ.setdefault("LAZYFUEL_BACKEND", "vulkan")

import lazyfuel as lf
from lazyfuel.graph.resident import held_blocks

try:
    import torch
except ImportError:  # torch is optional: its row is left out
    torch = None
CUDA = torch is not None and torch.cuda.is_available()

COUNTS: Counter[str] = Counter()


def _count_device_calls() -> None:
    """Count new device memory blocks and new recording contexts (wrapping the two makers)."""
    from lazyfuel.backends.vulkan import batch, memory

    new_block = memory.VulkanAllocator._new_unlocked

    def counted_block(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        COUNTS["vkAllocateMemory"] += 1
        return new_block(self, *args, **kwargs)

    memory.VulkanAllocator._new_unlocked = counted_block  # type: ignore[method-assign]
    context_init = batch.Context.__init__

    def counted_context(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        COUNTS["contexts"] += 1
        context_init(self, *args, **kwargs)

    batch.Context.__init__ = counted_context  # type: ignore[method-assign]


def _x(rows: int, cols: int, chunk_rows: int) -> tuple[lf.Array, Any, np.ndarray]:
    """(x resident in `chunk_rows` blocks, the torch tensor it was copied from or None, the host
    array to check against): made on the GPU by torch where CUDA shares it (as data_path.py's W3:
    16 GiB in seconds), else random on the host."""
    if CUDA:
        xt = torch.rand((rows, cols), device="cuda", dtype=torch.float32)
        xt[:, 0] = torch.arange(rows, device="cuda", dtype=torch.float32)
        torch.cuda.synchronize()
        return lf.from_array(xt, chunks=(chunk_rows, cols)), xt, None
    host = np.random.default_rng(3).standard_normal((rows, cols), dtype=np.float32)
    return lf.from_array(host, chunks=(chunk_rows, cols)).persist(device=True), None, host


def _best(run: Callable[[], Any], rounds: int, warm_s: float) -> tuple[float, list[float]]:
    """Best wall seconds of `rounds` runs after `warm_s` seconds of untimed runs (a GPU left idle
    drops to its idle clock), and every round's seconds."""
    end = time.perf_counter() + warm_s
    while time.perf_counter() < end:
        run()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        if CUDA:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return min(times), times


def run(mib: int, chunk_mib: float, row_bytes: int, rounds: int, threads: list[int | None], modes: list[str],
        profile: bool, warm_s: float) -> None:
    cols = row_bytes // 4
    rows = (mib << 20) // row_bytes
    chunk_rows = max(1, int(chunk_mib * 2**20) // row_bytes)
    x, xt, host = _x(rows, cols, chunk_rows)
    rng = np.random.default_rng(row_bytes)
    idx = np.concatenate([s + rng.permutation(min(chunk_rows, rows - s)) for s in range(0, rows, chunk_rows)])
    mask = rng.random((rows, 1)) < 0.5
    blocks = len(x.chunks[0])
    nbytes = 2 * rows * row_bytes
    print(f"\n{mib} MiB, {blocks} blocks of {chunk_mib:g} MiB, {row_bytes} B rows, {threads} threads; "
          f"TB/s = (x read + y written) / best wall of {rounds} after {warm_s:g} s back to back")
    print("| configuration | best ms | TB/s | rounds ms | programs / submits | device ms | kernel ms | "
          "MiB up / down | vkAllocateMemory | new contexts |\n|---|---|---|---|---|---|---|---|---|---|")
    torch_s = None
    if CUDA:
        idx_t, mask_t = torch.from_numpy(idx).cuda(), torch.from_numpy(mask).cuda()
        torch_s, times = _best(partial(_torch_w3, xt, idx_t, mask_t), rounds, warm_s)
        print(f"| torch index_select + masked_fill_ (resident tensors) | {torch_s * 1e3:.2f} | "
              f"{nbytes / torch_s / 1e12:.3f} | {_ms(times)} | - | - | - | - | - | - |")
    for mode, n_threads in [(m, t) for m in modes for t in threads]:
        knob = {"main": {"kept_indices": 0}, "per block": {"device_task_bytes": 0}}.get(mode, {})
        m = mask
        if mode == "mask resident":
            m = lf.from_array(mask, chunks=(chunk_rows, 1)).persist(device=True)
        y = x.index_select(0, idx).masked_fill(m, -1.0)
        held: list[Any] = []
        once = partial(_persisted, y, held, n_threads)
        with lf.config(**knob):
            best, times = _best(once, rounds, warm_s)
            COUNTS.clear()
            with lf.profile() as p:
                once()
        first = np.asarray(held_blocks(held[0].to_dask())[0])
        src = host[:chunk_rows] if host is not None else xt[:chunk_rows].cpu().numpy()
        want = np.where(mask[:chunk_rows], np.float32(-1), src[idx[:chunk_rows]])
        assert first.tobytes() == want.tobytes(), f"{mode}: block 0 differs from numpy"
        held.clear()
        kernel = p.kernel_seconds if p.kernel_seconds is not None else float("nan")
        name = {"main": "kept_indices=0 (main)", "kept": "kept indices (default)",
                "mask resident": "kept indices, mask persisted (N, 1)",
                "per block": "kept indices, one task per block (device_task_bytes=0)"}[mode]
        ratio = f" ({torch_s / best:.2f}x torch)" if torch_s else ""
        name += f", {n_threads or 'default'} threads" if len(threads) > 1 else ""
        print(f"| {name}{ratio} | {best * 1e3:.2f} | {nbytes / best / 1e12:.3f} | "
              f"{_ms(times)} | {p.programs} / {p.submits} | {p.device_seconds * 1e3:.1f} | "
              f"{kernel * 1e3:.1f} | {p.bytes_uploaded / 2**20:.1f} / {p.bytes_downloaded / 2**20:.1f} | "
              f"{COUNTS['vkAllocateMemory']} | {COUNTS['contexts']} |", flush=True)
        if profile:
            with lf.config(**knob):
                prof = cProfile.Profile()
                prof.enable()
                y.persist(device=True, scheduler="sync")
                prof.disable()
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(12)
            print(f"cProfile of {name}, one compute on the synchronous scheduler (own time):")
            print("\n".join(line for line in text.getvalue().splitlines()[6:] if line.strip()))
        del y, m, once
    del x, xt
    gc.collect()


def _torch_w3(xt: Any, idx_t: Any, mask_t: Any) -> Any:
    return torch.index_select(xt, 0, idx_t).masked_fill_(mask_t, -1.0)


def _persisted(y: lf.Array, held: list[Any], threads: int | None) -> None:
    """`y.persist(device=True)` into `held` on `threads` dask threads (None: lazyfuel's default),
    the last result let go first (as a loop's `out = None; out = y.persist(...)` does)."""
    held.clear()
    held.append(y.persist(device=True) if threads is None else
                y.persist(device=True, scheduler="threads", num_workers=threads))


def _ms(times: list[float]) -> str:
    return " ".join(f"{t * 1e3:.1f}" for t in times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--chunk-mib", type=float, default=4, help="block size (0.015625: 16 KiB blocks)")
    parser.add_argument("--row-bytes", default="1024,64")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", default="16",
                        help="comma-separated dask thread counts; `default`: none given (lazyfuel's choice)")
    parser.add_argument("--modes", default="main,kept,mask resident",
                        help="comma-separated: main (kept_indices=0), kept, mask resident")
    parser.add_argument("--warm-s", type=float, default=1.0)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    _count_device_calls()
    modes = [m for m in args.modes.split(",") if m]
    for row_bytes in [int(b) for b in args.row_bytes.split(",") if b]:
        threads = [None if t == "default" else int(t) for t in args.threads.split(",") if t]
        run(args.mib, args.chunk_mib, row_bytes, args.rounds, threads,
            modes, args.profile, args.warm_s)


if __name__ == "__main__":
    main()
