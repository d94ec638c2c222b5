"""W4's hand-off piece by piece: where `torch.from_dlpack(y.compute(device=True))` spends the time
the compute alone does not.

data_path's W4 (one 1 GiB block of a resident x, index_select + masked_fill, result on the GPU)
put the hand-off at 1.03-1.07x the compute alone in session 11, against 1.006x in session 10: the
compute got faster (a filled row is no longer read) and the hand-off's own cost did not. This
probe times, after `--warm` s of computes, `--rounds` rounds of each piece back to back with
`time.perf_counter`: the compute, `__dlpack__` (the capsule), `torch.from_dlpack` of the array
(the capsule made inside), `torch.cuda.synchronize()`, and dropping the tensor and the array;
then `torch.from_dlpack`'s own steps on a fresh array, each timed (`__dlpack_device__`,
`torch.cuda.current_stream`, `__dlpack__(stream=, max_version=)`, torch's C import of the capsule)
beside the whole call on the next array, and the same call on a torch tensor and a CuPy array (the
floor: producers whose export is C); then cProfile of `--rounds` hand-offs (the compute included)
and of as many computes alone, the top functions by own time of each.

    python benchmarks/probes/w4_handoff.py                    # the H200 run (needs torch with CUDA)
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))  # the repository root

import lazyfuel as lf


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024, help="the block, MiB")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--warm", type=float, default=1.0, help="seconds of computes first")
    parser.add_argument("--top", type=int, default=25, help="functions listed per profile")
    parser.add_argument("--spin-us", type=int, default=300, help="CPU spin before one hand-off variant")
    args = parser.parse_args(argv)
    import torch

    cols = 256
    rows = (args.mib << 20) // (cols * 4)
    xt = torch.rand((2 * rows, cols), device="cuda", dtype=torch.float32)
    x = lf.from_array(xt, chunks=(rows, cols))
    idx = np.random.default_rng(4).permutation(rows).astype(np.int64)
    mask = np.random.default_rng(5).random((rows, 1)) < 0.5
    y = x.index_select(0, idx).masked_fill(mask, -1.0)
    end = time.perf_counter() + args.warm
    while time.perf_counter() < end:
        r = y.compute(device=True)
        del r
    pieces: dict[str, list[float]] = {k: [] for k in ("compute", "__dlpack__", "torch.from_dlpack",
                                                      "synchronize", "drop")}
    stream = torch.cuda.current_stream().cuda_stream
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        r = y.compute(device=True)
        t1 = time.perf_counter()
        capsule = r.__dlpack__(stream=stream)
        t2 = time.perf_counter()
        t = torch.from_dlpack(r)
        t3 = time.perf_counter()
        torch.cuda.synchronize()
        t4 = time.perf_counter()
        del t, r, capsule
        t5 = time.perf_counter()
        for name, a, b in zip(pieces, (t0, t1, t2, t3, t4), (t1, t2, t3, t4, t5)):
            pieces[name].append(b - a)
    _report(f"{args.mib} MiB block, {args.rounds} rounds; ms per piece: best / median", pieces)
    # torch.from_dlpack's own steps on a fresh array, each timed: what torch's Python asks of the
    # producer (the device, the consumer stream, the capsule) and torch's C import of the capsule
    steps: dict[str, list[float]] = {k: [] for k in (
        "compute", "__dlpack_device__", "torch.cuda.current_stream", "__dlpack__(stream, max_version)",
        "torch._C._from_dlpack(capsule)", "synchronize", "whole torch.from_dlpack, next array")}
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        r = y.compute(device=True)
        t1 = time.perf_counter()
        _, number = r.__dlpack_device__()
        t2 = time.perf_counter()
        s = torch.cuda.current_stream(f"cuda:{number}").cuda_stream
        t3 = time.perf_counter()
        capsule = r.__dlpack__(stream=s, max_version=(1, 0))
        t4 = time.perf_counter()
        t = torch._C._from_dlpack(capsule)
        t5 = time.perf_counter()
        torch.cuda.synchronize()
        t6 = time.perf_counter()
        del t, r, capsule
        r = y.compute(device=True)
        torch.cuda.synchronize()
        t7 = time.perf_counter()
        t = torch.from_dlpack(r)
        t8 = time.perf_counter()
        del t, r
        for name, a, b in zip(steps, (t0, t1, t2, t3, t4, t5, t7), (t1, t2, t3, t4, t5, t6, t8)):
            steps[name].append(b - a)
    _report("torch.from_dlpack step by step on a fresh array (the next row: the whole call)", steps)
    # cold or fresh: the first hand-off right after a compute against a second one on another fresh
    # array (the code warm, the array as new), and one after the CPU spun `--spin-us` after the compute
    fresh: dict[str, list[float]] = {k: [] for k in (
        "from_dlpack, first after the compute", "from_dlpack, a second fresh array",
        f"from_dlpack after {args.spin_us} us spun")}
    names = list(fresh)
    for _ in range(args.rounds):
        r1 = y.compute(device=True)
        r2 = y.compute(device=True)
        t0 = time.perf_counter()
        t1_ = torch.from_dlpack(r1)
        t1 = time.perf_counter()
        t2_ = torch.from_dlpack(r2)
        t2 = time.perf_counter()
        fresh[names[0]].append(t1 - t0)
        fresh[names[1]].append(t2 - t1)
        del t1_, t2_, r1, r2
        r = y.compute(device=True)
        end = time.perf_counter() + args.spin_us * 1e-6
        while time.perf_counter() < end:
            pass
        t0 = time.perf_counter()
        t = torch.from_dlpack(r)
        fresh[names[2]].append(time.perf_counter() - t0)
        del t, r
    _report("cold or fresh: the hand-off's cost by what ran just before it", fresh)
    _polling(y, args.rounds)
    # the floor: torch.from_dlpack of producers whose export is C (a torch tensor, a CuPy array)
    floor: dict[str, list[float]] = {"torch.from_dlpack(torch tensor)": []}
    tt = torch.empty((rows, cols), device="cuda")
    try:
        import cupy
        cp = cupy.empty((rows, cols), dtype=cupy.float32)
        floor["torch.from_dlpack(cupy array)"] = []
    except Exception:  # CuPy absent or unusable: the torch floor alone
        cp = None
    for _ in range(args.rounds):
        for name, source in zip(floor, (tt, cp)):
            torch.cuda.synchronize()
            a = time.perf_counter()
            t = torch.from_dlpack(source)
            floor[name].append(time.perf_counter() - a)
            del t
    _report("the floor: the same call on producers exporting in C", floor)

    def handed() -> None:
        t = torch.from_dlpack(y.compute(device=True))
        torch.cuda.synchronize()
        del t

    def alone() -> None:
        r = y.compute(device=True)
        torch.cuda.synchronize()
        del r

    for name, run in (("hand-off", handed), ("compute alone", alone)):
        profile = cProfile.Profile()
        start = time.perf_counter()
        profile.enable()
        for _ in range(args.rounds):
            run()
        profile.disable()
        wall = (time.perf_counter() - start) / args.rounds
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(args.top)
        print(f"\n=== cProfile, {name}: {wall * 1e3:.3f} ms a round under the profiler\n{text.getvalue()}")
    return 0


def _polling(y: lf.Array, rounds: int) -> None:
    """W4's two sides interleaved (`rounds` each after a second of load: the compute alone, and
    `torch.from_dlpack` of it, each synchronised), with the pool's fence waits asleep at once
    (`fence_spin` 0, the default) and polling first (`fence_wait.FenceWaiter`, the setting made, else
    2 ms): what the driver's wake-up costs the compute and the hand-off."""
    import torch

    from lazyfuel.backends.vulkan import get_pool

    fences = get_pool().fences
    default = fences.spin_s
    polled = default or 0.002  # the setting where one is made, else 2 ms (the first default tried)

    def alone() -> None:
        r = y.compute(device=True)
        torch.cuda.synchronize()
        del r

    def handed() -> None:
        t = torch.from_dlpack(y.compute(device=True))
        torch.cuda.synchronize()
        del t

    times: dict[str, list[float]] = {}
    waits = (("asleep (fence_spin 0)", 0.0), (f"polling first (fence_spin {polled:g} s)", polled))
    for wait_name, spin in waits:
        fences.spin_s = spin
        try:
            end = time.perf_counter() + 1.0
            while time.perf_counter() < end:
                alone()
            runs = {f"{wait_name}: compute alone": [], f"{wait_name}: torch.from_dlpack(compute)": []}
            for _ in range(rounds):
                for name, run in zip(runs, (alone, handed)):
                    a = time.perf_counter()
                    run()
                    runs[name].append(time.perf_counter() - a)
            times.update(runs)
        finally:
            fences.spin_s = default
    _report("the fence wait asleep or polled first: the compute alone and handed to torch, interleaved",
            times)
    for wait_name, _ in waits:
        a, h = times[f"{wait_name}: compute alone"], times[f"{wait_name}: torch.from_dlpack(compute)"]
        print(f"  {wait_name}: hand-off vs alone, best {min(h) / min(a):.3f}x, "
              f"median {statistics.median(h) / statistics.median(a):.3f}x", flush=True)


def _report(title: str, pieces: dict[str, list[float]]) -> None:
    """Print `title` and each piece's best and median, ms."""
    print(f"\n{title}", flush=True)
    width = max(map(len, pieces)) + 2
    for name, v in pieces.items():
        print(f"  {name:<{width}}{min(v) * 1e3:8.3f}{statistics.median(v) * 1e3:8.3f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
