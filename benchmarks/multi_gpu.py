"""The same device-resident pipeline on one GPU and on two: throughput, the 2/1 ratio, bit-equality.

The pipeline of every block: `masked_fill(index_select(x, 0, idx), mask, -1.0)` on an (R, 1024)
float32 block, planned once by the planner (one program: IndexSelect then MaskedFill, the
intermediate kept on the device). Device-resident: each block's inputs are uploaded once
(`backends.vulkan.resident`), then a command buffer holding `--reps` runs of all the blocks of a
device is recorded once and submitted again and again, one Python thread per device (the threads
wait on fences with the GIL released). Blocks are placed as the graph layer places them: block b
on device b mod n. One GPU holds all the blocks; two GPUs hold half each (their own copies), so
both configurations do the same work. Each round warms every GPU used for `--warm` seconds (an
H200 needs 0.2-0.45 s of load to leave 345 MHz), then times about `--seconds`; the rounds
alternate one GPU / two GPUs and the median of each is reported. At the end every block's output
from both configurations is downloaded and compared byte for byte with each other and with numpy.

Bytes counted per block: index_select reads and writes R x 1024 x 4 and reads 4R of indices;
masked_fill reads R x 1024 x 4 of data and R x 1024 of mask and writes R x 1024 x 4.

`--w3` adds issue 18's resident workload W3 through the public API, on one GPU and on two in the
same run: x = (N, 1024) float32 of `--w3-gib` GiB (16) in chunks of `--w3-chunk-mib` MiB, persisted
with `x.persist(device=True)` (once spread over the first device alone, once over both: each
block in the pool that holds it), y = masked_fill(index_select(x, 0, idx), mask (N, 1), -1) with
idx permuting rows inside each chunk, its result kept on the GPUs with `y.persist(device=True)`
(a result per GPU block, where its input lies). GB/s counts x read once and y written once (2 x
bytes of x) over the wall time of one persist, median of `--rounds` rounds alternating one GPU /
two GPUs; `lf.profile` gives the bytes through the host (the indices and mask, uploaded each
compute) and device to device per compute. Then `y.compute(device=True)` gathers the result onto
one GPU once per configuration (timed; between two GPUs its bytes cross through the host, as no
peer path between GPUs is built: `lf.explain` says so). Every block of both results is compared
bit for bit with each other, and with numpy on the first, a middle and the last. `--only-w3`
runs W3 alone (the `w3` stage of gpu_run.sh).

`--graph` adds the lazy API on host data (`lf.from_array(...).index_select(...).masked_fill(...)`
computed with dask threads, `LAZYFUEL_DEVICES` set to one device, then two): every task uploads
its chunk and downloads its block, so this line measures the host side, not the GPUs.

    python benchmarks/multi_gpu.py                                  # 8 blocks of 256 MiB
    LAZYFUEL_DEVICES=0,0 python benchmarks/multi_gpu.py --quick     # two pools on one device
    LAZYFUEL_DEVICES=0,0 python benchmarks/multi_gpu.py --quick --only-w3   # W3 at 64 MiB here
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from data_path import make_inputs, permutation  # this folder's W1 inputs, which W3 shares
from threads import threaded  # this folder's harness

import lazyfuel as lf
from lazyfuel.api import DefaultRuntime
from lazyfuel.backends.vulkan import get_pool
from lazyfuel.backends.vulkan.pool import DevicePool, spread_slots
from lazyfuel.backends.vulkan.resident import ResidentBatch, ResidentProgram
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.planner import Chain, OpNode
from lazyfuel.planner.program import Program

COLS = 1024
FILL = -1.0
CHAIN = Chain(3, (OpNode("IndexSelect", (0, 1), (("dim", 0),)),
                  OpNode("MaskedFill", (3, 2), (("value", FILL),))), (4,))


def make_block(b: int, rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Block b's source (distinct bit patterns, no NaNs), indices (a random row order) and mask."""
    rng = np.random.default_rng(b)
    start = b * rows * COLS
    x = np.arange(start, start + rows * COLS, dtype=np.uint32).view(np.float32).reshape(rows, COLS)
    idx = rng.permutation(rows).astype(np.uint32)
    mask = rng.integers(0, 2, (rows, COLS), dtype=np.uint8).view(bool)
    return x, idx, mask


def bytes_per_block(rows: int) -> int:
    return rows * COLS * 4 * 2 + rows * 4 + rows * COLS * (4 + 1 + 4)


class Config:
    """n devices holding the blocks b with b mod n == d on device d, each with a recorded batch."""

    def __init__(self, pools: list[DevicePool], program: Program, blocks: list, reps: int) -> None:
        self.pools = pools
        self.programs = [ResidentProgram(pools[b % len(pools)], program, data)
                         for b, data in enumerate(blocks)]
        self.batches = [ResidentBatch(pool, [p for p in self.programs if p.pool is pool], reps)
                        for pool in pools]

    def run(self, calls: int) -> float:
        """Every device submits its batch `calls` times, all devices at once; the wall seconds."""
        def work(i: int) -> None:
            for _ in range(calls):
                self.batches[i]()

        return threaded(len(self.batches), work)

    def results(self) -> list[np.ndarray]:
        return [p.results()[0] for p in self.programs]

    def close(self) -> None:
        for b in self.batches:
            b.close()
        for p in self.programs:
            p.free()


def timed_round(config: Config, warm: float, seconds: float, reps: int, n_blocks: int, rows: int) -> float:
    """Warm for `warm` seconds, then run about `seconds`; GB/s of pipeline traffic."""
    calls, spent = 0, 0.0
    while spent < warm:
        spent += config.run(1)
        calls += 1
    calls = max(1, round(seconds / (spent / calls)))
    wall = config.run(calls)
    return calls * reps * n_blocks * bytes_per_block(rows) / wall / 1e9


def graph_line(slots_env: list[str], blocks: list, rows: int, rounds: int) -> tuple[list[float], bool]:
    """GB/s of the lazy API on host data with LAZYFUEL_DEVICES = the first item, then all items,
    and whether both gave the same bytes."""
    x = np.concatenate([d[0] for d in blocks])
    mask = np.concatenate([d[2] for d in blocks])
    idx = np.concatenate([d[1].astype(np.int64) + b * rows for b, d in enumerate(blocks)])
    found, outs = [], []
    for env in (slots_env[:1], slots_env):
        with lf.config(devices=",".join(env)):
            y = lf.from_array(x, chunks=(rows, COLS)).index_select(0, idx).masked_fill(mask, FILL)
            outs.append(y.compute(scheduler="threads", num_workers=4 * len(env)))
            times = []
            for _ in range(rounds):
                t = time.perf_counter()
                y.compute(scheduler="threads", num_workers=4 * len(env))
                times.append(time.perf_counter() - t)
        found.append(len(blocks) * bytes_per_block(rows) / statistics.median(times) / 1e9)
    return found, outs[0].tobytes() == outs[1].tobytes()


def w3_config(x: np.ndarray, devices: str, chunk_rows: int) -> lf.Array:
    """x persisted in device memory, spread over `devices` (each block in its pool)."""
    return lf.from_array(x, chunks=(chunk_rows, COLS)).persist(device=True, devices=devices,
                                                                  backend="vulkan")


def w3_line(slots_env: list[str], gib: float, chunk_mib: int, rounds: int) -> bool:
    """Issue 18's W3 on the first device and on the first two (see the module docstring); prints
    its lines and returns whether every result was bit-equal."""
    t = time.perf_counter()
    x, mask = make_inputs(gib)
    chunk_rows = max(1, chunk_mib * 2**20 // (COLS * 4))
    idx = permutation(len(x), chunk_rows, seed=3)
    moved = 2 * x.nbytes  # x read once, y written once
    envs = {1: ",".join(slots_env[:1]), 2: ",".join(slots_env[:2])}
    held = {n: w3_config(x, env, chunk_rows) for n, env in envs.items()}
    ys = {n: xp.index_select(0, idx).masked_fill(mask, FILL) for n, xp in held.items()}
    print(f"W3: x ({len(x)}, {COLS}) f32 = {x.nbytes / 2**30:.1f} GiB in chunks of {chunk_mib} MiB, "
          f"persisted on 1 device and on 2 in {time.perf_counter() - t:.1f} s; y = masked_fill("
          f"index_select(x, 0, idx within chunks), mask ({len(x)}, 1), {FILL}), kept on the GPUs")
    found: dict[int, list[float]] = {1: [], 2: []}
    profiles: dict[int, Any] = {}
    for n, y in ys.items():  # warm: pipelines, allocator caches
        with lf.config(devices=envs[n], backend="vulkan"):
            y.persist(device=True)
    for r in range(rounds):
        for n, y in ys.items():
            with lf.config(devices=envs[n], backend="vulkan"), lf.profile() as p:
                t = time.perf_counter()
                yp = y.persist(device=True)
                found[n].append(moved / (time.perf_counter() - t) / 1e9)
            profiles[n] = p
            del yp
        print(f"W3 round {r + 1}: 1 GPU {found[1][-1]:.1f} GB/s, 2 GPUs {found[2][-1]:.1f} GB/s")
    one, two = statistics.median(found[1]), statistics.median(found[2])
    for n, p in profiles.items():
        print(f"W3 {n} GPU(s) per compute: {p.bytes_uploaded / 2**20:.1f} MiB up, "
              f"{p.bytes_downloaded / 2**20:.1f} MiB down, {p.bytes_peer / 2**20:.1f} MiB device to "
              f"device; programs per device: {dict(p.devices)}")
    results = {}
    for n, y in ys.items():
        with lf.config(devices=envs[n], backend="vulkan"):
            yp = y.persist(device=True)
            results[n] = yp
            try:  # one allocation of the whole result: past maxMemoryAllocationSize it cannot be
                with lf.profile() as p:
                    t = time.perf_counter()
                    gathered = y.compute(device=True)
                    took = time.perf_counter() - t
            except MemoryError as err:
                print(f"W3 {n} GPU(s), compute(device=True) gathered onto one GPU: not run ({err})")
                continue
            print(f"W3 {n} GPU(s), compute(device=True) gathered onto {gathered.device}: "
                  f"{took * 1e3:.1f} ms, "
                  f"{(p.bytes_uploaded + p.bytes_downloaded) / 2**20:.1f} MiB through the host, "
                  f"{p.bytes_peer / 2**20:.1f} MiB device to device")
            del gathered
    with lf.config(devices=envs[2], backend="vulkan"):
        meet = [line.strip() for line in lf.explain(results[2]).splitlines() if " meet " in line]
    print("W3 2 GPUs, explain:", meet[0] if meet else "(one device: nothing meets)")
    t = time.perf_counter()
    one_blocks, two_blocks = (_held_blocks(results[n]) for n in (1, 2))
    equal = all(np.asarray(a).tobytes() == np.asarray(b).tobytes() for a, b in zip(one_blocks, two_blocks))
    n_blocks = len(one_blocks)
    reference = True
    for c in sorted({0, n_blocks // 2, n_blocks - 1}):
        rows = slice(c * chunk_rows, min((c + 1) * chunk_rows, len(x)))
        want = np.where(mask[rows], np.float32(FILL), x[idx[rows]])
        reference &= np.asarray(two_blocks[c]).tobytes() == want.tobytes()
    print(f"W3 checked in {time.perf_counter() - t:.1f} s")
    print(f"RESULT W3 resident (public API, result kept on the GPUs): 1 GPU {one:.1f} GB/s, 2 GPUs "
          f"{two:.1f} GB/s, ratio {two / one:.2f}x; 2-GPU result bit-equal to 1-GPU: {equal}; to numpy: "
          f"{reference}")
    return equal and reference


def _held_blocks(arr: lf.Array) -> list:
    """The device blocks a persisted Array holds, row-major."""
    from dask.core import flatten

    dsk = arr.to_dask()
    graph = dsk.__dask_graph__()
    return [graph[k] for k in flatten(dsk.__dask_keys__())]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--block-mib", type=int, default=256, help="source MiB per block")
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--reps", type=int, default=8, help="runs of every block per submit")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warm", type=float, default=1.0)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--graph", action="store_true", help="also the lazy API on host data")
    parser.add_argument("--w3", action="store_true", help="also issue 18's resident W3 (public API)")
    parser.add_argument("--only-w3", action="store_true", help="W3 alone")
    parser.add_argument("--w3-gib", type=float, default=16.0, help="GiB of x for W3")
    parser.add_argument("--w3-chunk-mib", type=int, default=256, help="MiB per chunk of x for W3")
    parser.add_argument("--quick", action="store_true", help="4 blocks of 4 MiB, short rounds; W3 of "
                        "64 MiB in chunks of 8 MiB")
    args = parser.parse_args()
    if args.quick:
        args.block_mib, args.blocks, args.warm, args.seconds, args.rounds = 4, 4, 0.2, 0.3, 2
        args.w3_gib, args.w3_chunk_mib = 1 / 16, 8
    slots = spread_slots()
    if len(slots) < 2:
        sys.exit(f"blocks are spread over {len(slots)} device(s) {slots}; set LAZYFUEL_DEVICES to two "
                 "(LAZYFUEL_DEVICES=0,0 gives two pools on one device)")
    env = [s for s in (lf.config.devices or "").split(",") if s.strip()] or [str(i) for i, _ in slots[:2]]
    if args.only_w3:
        if not w3_line(env, args.w3_gib, args.w3_chunk_mib, args.rounds):
            sys.exit("W3 results differ")
        return
    pools = [get_pool(*slot) for slot in slots[:2]]
    rows = args.block_mib * 2**20 // (COLS * 4)
    print(f"devices: {' | '.join(p.label + ' (' + p.info.kind + ')' for p in pools)}")
    print(f"pipeline: masked_fill(index_select(x[{rows}, {COLS}] f32, 0, {rows} rows), mask, {FILL}) "
          f"x {args.blocks} blocks; {args.reps} runs of every block per submit; "
          f"{bytes_per_block(rows) / 1e9:.3f} GB of traffic per block run")
    t = time.perf_counter()
    blocks = [make_block(b, rows) for b in range(args.blocks)]
    first = blocks[0]
    program = DefaultRuntime("vulkan").planner().plan(
        CHAIN, [DType.from_numpy(a.dtype) for a in first], [Layout.of(a) for a in first])
    configs = {1: Config(pools[:1], program, blocks, args.reps), 2: Config(pools, program, blocks, args.reps)}
    print(f"data made and uploaded in {time.perf_counter() - t:.1f} s "
          f"({sum(p.bytes_resident for c in configs.values() for p in c.programs) / 2**30:.1f} GiB resident)")
    found: dict[int, list[float]] = {1: [], 2: []}
    for r in range(args.rounds):
        for n, config in configs.items():
            found[n].append(timed_round(config, args.warm, args.seconds, args.reps, args.blocks, rows))
        print(f"round {r + 1}: 1 GPU {found[1][-1]:.1f} GB/s, 2 GPUs {found[2][-1]:.1f} GB/s")
    one, two = statistics.median(found[1]), statistics.median(found[2])
    t = time.perf_counter()
    outs = {n: c.results() for n, c in configs.items()}
    equal = all(a.tobytes() == b.tobytes() for a, b in zip(outs[1], outs[2]))
    reference = all(o.tobytes() == np.where(m, np.float32(FILL), x[i]).tobytes()
                    for o, (x, i, m) in zip(outs[1], blocks))
    print(f"checked in {time.perf_counter() - t:.1f} s")
    for config in configs.values():
        config.close()
    print(f"RESULT device-resident: 1 GPU {one:.1f} GB/s, 2 GPUs {two:.1f} GB/s, ratio {two / one:.2f}x; "
          f"2-GPU result bit-equal to 1-GPU: {equal}; to numpy: {reference}")
    same = True
    if args.graph:
        (g1, g2), same = graph_line(env, blocks, rows, args.rounds)
        print(f"RESULT lazy API on host data: 1 GPU {g1:.1f} GB/s, 2 GPUs {g2:.1f} GB/s, "
              f"ratio {g2 / g1:.2f}x; bit-equal: {same}")
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=index,name,clocks.sm,clocks.mem",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        print("clocks after:", smi.stdout.strip().replace("\n", " | "))
    except (OSError, subprocess.SubprocessError):
        pass
    if args.w3:
        same &= w3_line(env, args.w3_gib, args.w3_chunk_mib, args.rounds)
    if not (equal and reference and same):
        sys.exit("results differ")


if __name__ == "__main__":
    main()
