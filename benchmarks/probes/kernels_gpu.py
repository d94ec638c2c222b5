"""Issue 3's GPU acceptance: select kernels vs device copy and torch, and tiny-dispatch overhead.

Part 1, bandwidth (F32, `--mib` per buffer, default 1024 = 256M elements): after `--warmup`
seconds of copy-shader load, each kernel runs on resident buffers, `--reps` repetitions (with
barriers) per command buffer, batches repeated for `--seconds`; per repetition it reports the GPU
time from timestamps (vkCmdWriteTimestamp before and after, `timestampPeriod` from the limits)
and the wall time around submit + fence wait, both as the median over batches. Beside it: the
device copy (vkCmdCopyBuffer and the copy shader), every (workgroup size, elements per
invocation) of `--groups` for each kernel (gather with and without quads), and torch's CUDA
copy_ / index_select / gather / masked_fill on the same GPU and sizes, timed with CUDA events.
GB/s = bytes read + written + index/mask bytes (u32 indices, 1-byte mask) / time, for both.
Rounds alternate Vulkan, torch, Vulkan. `nvidia-smi` samples the clocks every 100 ms meanwhile.

Part 2, 1000 tiny dispatches (masked_fill of 64 F32, each on its own output) in one command
buffer, per dispatch: host recording time, GPU time (timestamps around them) and the wall time
of record + submit + wait, for: kernel.record with a barrier after each (the old path), without
barriers, prepared items replayed (`Batch.replay`), and the same command buffer submitted again.

    python benchmarks/probes/kernels_gpu.py --out DIR          # the H200 run (bash benchmarks/gpu_run.sh)
    python benchmarks/probes/kernels_gpu.py --mib 16 --warmup 0.2 --seconds 0.05 --groups 64x4,128x8
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))  # the repository root

from benchmarks.kernels import BenchStep, Device, optional
from benchmarks.probes.gpu_clocks import Clocks, vulkan_uuid
from lazyfuel.backends.vulkan.fill_kernels import MaskedFillKernel
from lazyfuel.backends.vulkan.kernels import (
    GatherKernel,
    IndexSelectKernel,
    StatusSlot,
    bind,
)
from lazyfuel.backends.vulkan.memory import Allocation
from lazyfuel.backends.vulkan.timestamps import Timestamps

INNER = 256  # row length of the [n / 256, 256] views
POISON = 0xA5A5A5A5


class Timed(Device):
    """`Device` (benchmarks/kernels.py) plus GPU timestamps around the repetitions of each batch."""

    def __init__(self, reps: int, seconds: float, warmup: float) -> None:
        super().__init__(reps, seconds)
        self.stamps = Timestamps(self.pool, 2)
        self.warmup = warmup

    def measure(self, record: Callable[[Any], None], seconds: float | None = None) -> tuple[float, float]:
        """(GPU seconds, wall seconds) per repetition: medians over batches lasting `seconds`."""
        gpu, wall, spent = [], [], 0.0
        limit = self.seconds if seconds is None else seconds
        while spent < limit or len(gpu) < 3:
            with self.pool.batch() as batch:
                self.stamps.reset(batch)
                self.stamps.write(batch, 0)
                for _ in range(self.reps):
                    record(batch)
                    batch.barrier()
                self.stamps.write(batch, 1)
                batch.run()
            t = self.stamps.read()
            gpu.append((t[1] - t[0]) * 1e-9 / self.reps)
            wall.append(batch.device_seconds / self.reps)
            spent += batch.device_seconds
        return statistics.median(gpu), statistics.median(wall)

    def warm(self, data: dict, seconds: float) -> None:
        """Keep the GPU copying for `seconds` (its clocks ramp up only under load)."""
        start = time.time()
        while time.time() - start < seconds:
            with self.pool.batch() as batch:
                for _ in range(self.reps):
                    batch.copy(data["x_d"].allocation, 0, data["out"], 0, 4 * data["n"])
                    batch.barrier()
                batch.run()

    def poison(self, alloc: Allocation, nbytes: int) -> None:
        with self.pool.batch() as batch:
            batch.recorder.fill(alloc.buffer, alloc.offset, nbytes, POISON)
            batch.run()


def check(out: Allocation, expected: Callable[[slice], np.ndarray], n: int) -> str:
    """Compare the first and last 16384 elements of `out` (F32) with `expected(slice)`."""
    if out.host is None:
        return "unchecked"
    flat = out.host[:4 * n].view(np.uint32)
    for part in (slice(0, min(n, 16384)), slice(max(0, n - 16384), n)):
        if not np.array_equal(flat[part], expected(part).view(np.uint32)):
            return "WRONG"
    return "ok"


def vulkan_round(dev: Timed, data: dict, groups: list[tuple[int, int]], clocks: Clocks, tag: str) -> dict:
    """Every kernel under every group size: {name: {config: (gpu GB/s, wall GB/s, check)}}."""
    pool, n = dev.pool, data["n"]
    xd, out, slot = data["x_d"], data["out"], data["slot"]
    rows = n // INNER
    moved = {"copy": 8 * n, "index_select": 8 * n + 4 * rows, "gather": 12 * n, "masked_fill": 9 * n}
    x, x2 = data["x"], data["x"].reshape(rows, INNER)

    def by_rows(fn: Callable[[slice], np.ndarray]) -> Callable[[slice], np.ndarray]:
        """Expected flat elements `s` from `fn(rows)`, the expected output rows covering them."""
        def part(s: slice) -> np.ndarray:
            r0, r1 = s.start // INNER, -(-s.stop // INNER)
            return fn(slice(r0, r1)).reshape(-1)[s.start - r0 * INNER:s.stop - r0 * INNER]
        return part

    expect = {
        "index_select": by_rows(lambda r: x2[data["ridx"][r]]),
        "gather": by_rows(lambda r: np.take_along_axis(x2[r], data["gidx"][r].astype(np.intp), 1)),
        "masked_fill": lambda s: np.where(data["mask"][s], np.float32(0), x[s]),
    }
    is_step = BenchStep({"outer_count": 1, "source_dim_size": rows, "n_indices": rows, "inner_count": INNER},
                        (rows, INNER))
    g_step = BenchStep({"source_shape": (rows, INNER), "output_shape": (rows, INNER), "dim": 1},
                       (rows, INNER))
    mf_step = BenchStep({"fill_bytes": bytes(4)}, (n,))
    words = n // 4
    dst = bind(out, 4 * n)
    buffers = (bind(xd.allocation, 4 * n), dst, dst, dst) if pool.ssbo else None
    copy_values = [xd.allocation.address, out.address, 0, words, words, *[1] * 7, 1, *[0] * 7]
    results: dict[str, dict[str, Any]] = {}
    start = time.time()
    dev.warm(data, dev.warmup)
    clocks.mark(f"{tag} warm-up", start, time.time())

    def run(name: str, config: str, record: Callable[[Any], None], nbytes: int,
            expected: Callable[[slice], np.ndarray] | None) -> None:
        dev.poison(out, 4 * n)
        t0 = time.time()
        gpu, wall = dev.measure(record)
        clocks.mark(f"{tag} {name} {config}", t0, time.time())
        ok = check(out, expected, n) if expected else "ok"
        results.setdefault(name, {})[config] = (nbytes / gpu / 1e9, nbytes / wall / 1e9, ok)
        cells = f"{nbytes / gpu / 1e9:>10.1f}{nbytes / wall / 1e9:>10.1f}"
        print(f"  {tag:<8}{name:<22}{config:<10}{cells}  {ok}", flush=True)

    run("vkCmdCopyBuffer", "-", lambda b: b.copy(xd.allocation, 0, out, 0, 4 * n), moved["copy"],
        lambda s: x[s])
    for local, elems in groups:
        config = f"{local}x{elems}"
        spec = (local, elems, 0, 1, int(pool.coalesced))
        pipe = pool.pipelines.get(f"contiguize_w16{'_ssbo' if pool.ssbo else ''}", spec)
        run("copy shader", config, lambda b, p=pipe, ipg=local * elems: b.dispatch(
            p, "<QQQQ8I8q", list(copy_values), 2, words, ipg, buffers), moved["copy"], lambda s: x[s])
        for family in ("index_select", "gather", "masked_fill"):
            pool.groups[family] = (local, elems)
        run("index_select rows", config, lambda b: IndexSelectKernel().record(
            b, is_step, [xd, data["ridx_d"]], out, slot), moved["index_select"], expect["index_select"])
        for quads in (True, False):  # GatherKernel(quads=False): the gather_scalar binding's kernel
            gather = GatherKernel(quads)
            run("gather dim -1" + ("" if quads else " scalar"), config, lambda b, k=gather: k.record(
                b, g_step, [xd, data["gidx_d"]], out, slot), moved["gather"], expect["gather"])
        run("masked_fill", config, lambda b: MaskedFillKernel().record(
            b, mf_step, [xd, data["mask_d"]], out, None), moved["masked_fill"], expect["masked_fill"])
    return results


def torch_round(data: dict, device: Any, warmup: float, clocks: Clocks) -> dict[str, tuple[float, float]]:
    """torch on the CUDA device: {op: (event GB/s, wall GB/s)}, medians of 7 timings of 20 calls."""
    torch = data["torch"]
    n, rows = data["n"], data["n"] // INNER
    x = torch.from_numpy(data["x"]).to(device)
    x2 = x.view(rows, INNER)
    out = torch.empty_like(x)
    out2 = out.view(rows, INNER)
    ridx32 = torch.from_numpy(data["ridx"].astype(np.int32)).to(device)
    ridx64 = ridx32.long()
    gidx = torch.from_numpy(data["gidx"].astype(np.int64)).to(device).view(rows, INNER)
    mask = torch.from_numpy(data["mask"]).to(device)
    ops = {
        "copy_": (lambda: out.copy_(x), 8 * n),
        "index_select int32": (lambda: torch.index_select(x2, 0, ridx32, out=out2), 8 * n + 4 * rows),
        "index_select int64": (lambda: torch.index_select(x2, 0, ridx64, out=out2), 8 * n + 4 * rows),
        "gather int64": (lambda: torch.gather(x2, 1, gidx, out=out2), 12 * n),
        "masked_fill": (lambda: x.masked_fill(mask, 0.0), 9 * n),
        "masked_fill_ (in place)": (lambda: out.masked_fill_(mask, 0.0), 9 * n),
    }
    start = time.time()
    while time.time() - start < warmup:
        for _ in range(50):
            out.copy_(x)
        torch.cuda.synchronize(device)
    clocks.mark("torch warm-up", start, time.time())
    found = {}
    for name, (fn, nbytes) in ops.items():
        fn()
        torch.cuda.synchronize(device)
        events, walls = [], []
        t0 = time.time()
        for _ in range(7):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            w = time.perf_counter()
            a.record()
            for _ in range(20):
                fn()
            b.record()
            b.synchronize()
            walls.append((time.perf_counter() - w) / 20)
            events.append(a.elapsed_time(b) * 1e-3 / 20)
        clocks.mark(f"torch {name}", t0, time.time())
        found[name] = (nbytes / statistics.median(events) / 1e9, nbytes / statistics.median(walls) / 1e9)
        print(f"  torch   {name:<32}{found[name][0]:>10.1f}{found[name][1]:>10.1f}", flush=True)
    return found


def tiny_dispatches(dev: Timed, count: int) -> dict[str, tuple[float, float, float]]:
    """{path: (host recording, GPU, record + submit + wait) seconds per dispatch}, best of 5."""
    pool = dev.pool
    x, mask = dev.put(np.zeros(64, np.float32)), dev.put(np.zeros(64, bool))
    outs = dev.empty(256 * count)
    out_of = [Allocation(outs.block, outs.offset + 256 * i, 256, outs.address + 256 * i,
                         None if outs.host is None else outs.host[256 * i:256 * (i + 1)])
              for i in range(count)]
    step, kernel = BenchStep({"fill_bytes": bytes(4)}, (64,)), MaskedFillKernel()
    with pool.batch() as batch:
        items = [item for o in out_of for item in batch.prepare(kernel, step, [x, mask], o, None)]
    stamps = dev.stamps

    def once(record: Callable[[Any], None], reuse: Any = None) -> tuple[float, float, float]:
        if reuse is not None:
            t0 = time.perf_counter()
            reuse.run()
            wall = time.perf_counter() - t0
            t = stamps.read()
            return 0.0, (t[1] - t[0]) * 1e-9, wall
        with pool.batch() as batch:
            t0 = time.perf_counter()
            stamps.reset(batch)
            stamps.write(batch, 0)
            record(batch)
            stamps.write(batch, 1)
            host = time.perf_counter() - t0
            batch.run()
            wall = time.perf_counter() - t0
        t = stamps.read()
        return host, (t[1] - t[0]) * 1e-9, wall

    def full(barriers: bool) -> Callable[[Any], None]:
        def record(batch: Any) -> None:
            for o in out_of:
                kernel.record(batch, step, [x, mask], o, None)
                if barriers:
                    batch.barrier()
        return record

    def replay_with_barriers(batch: Any) -> None:
        for item in items:
            batch.replay([item])
            batch.barrier()

    paths = {"kernel.record + barrier each (before)": full(True), "kernel.record, no barriers": full(False),
             "replay, barrier each": replay_with_barriers,
             "replay prepared, no barriers": lambda b: b.replay(items)}
    found = {}
    for name, record in paths.items():
        runs = [once(record) for _ in range(6)][1:]
        found[name] = tuple(min(r[i] for r in runs) / count for i in range(3))
    with pool.batch() as batch:
        batch.reusable()
        stamps.reset(batch)
        stamps.write(batch, 0)
        batch.replay(items)
        stamps.write(batch, 1)
        runs = [once(lambda b: None, batch) for _ in range(6)][1:]
    found["same command buffer submitted again"] = tuple(min(r[i] for r in runs) / count for i in range(3))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024, help="F32 buffer size in MiB (default 1024)")
    parser.add_argument("--warmup", type=float, default=1.5, help="seconds of load before each round")
    parser.add_argument("--seconds", type=float, default=0.25, help="timed seconds per measurement")
    parser.add_argument("--reps", type=int, default=20, help="repetitions per command buffer")
    parser.add_argument("--groups", default="64x4,128x4,256x4,64x8,128x8,256x8,512x4,128x16")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp")))
    args = parser.parse_args(argv)
    groups = [tuple(int(v) for v in g.split("x")) for g in args.groups.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    dev = Timed(args.reps, args.seconds, args.warmup)
    pool, info = dev.pool, dev.pool.info
    uuid = vulkan_uuid(pool)
    clocks = Clocks(args.out / "clocks.csv")
    torch = optional("torch")
    cuda = None
    if torch is not None and torch.cuda.is_available():
        uuids = [str(torch.cuda.get_device_properties(i).uuid) for i in range(torch.cuda.device_count())]
        ids = [re.sub("[^0-9a-f]", "", u.lower().replace("gpu-", "")) for u in uuids]
        cuda = torch.device("cuda", ids.index(uuid) if uuid in ids else 0)
        if uuid not in ids:
            print(f"warning: no CUDA device has the Vulkan device's UUID ({ids}); torch runs on cuda:0")
    print(f"{datetime.now():%Y-%m-%d %H:%M:%S}; Vulkan device {info.name} ({info.driver} "
          f"{info.driver_info}), UUID {uuid}; torch {torch.__version__ if torch else '-'} on {cuda}; "
          f"memory {'storage buffers' if pool.ssbo else 'device addresses'}, "
          f"{'coalesced' if pool.coalesced else 'sequential'} mapping; "
          f"timestampPeriod {dev.stamps.period_ns} ns", flush=True)
    n = (args.mib << 20) // 4
    rng = np.random.default_rng(0)
    data: dict[str, Any] = {"n": n, "torch": torch}
    data["x"] = rng.integers(0, 1 << 32, n, dtype=np.uint32).view(np.float32)
    data["ridx"] = rng.integers(0, n // INNER, n // INNER).astype(np.uint32)
    data["gidx"] = rng.integers(0, INNER, (n // INNER, INNER), dtype=np.uint32)
    data["mask"] = rng.integers(0, 2, n, dtype=np.uint8).view(bool)
    for key in ("x", "ridx", "gidx", "mask"):
        data[key + "_d"] = dev.put(data[key])
    data["out"], status = dev.empty(4 * n), dev.empty(256)
    data["slot"] = StatusSlot(status, 0)
    print(f"F32, {n} elements ({args.mib} MiB) per buffer; {args.reps} reps per command buffer, "
          f"{args.seconds} s per figure; GB/s by GPU timestamps, then wall", flush=True)
    report: dict[str, Any] = {"rounds": []}
    report["rounds"].append(vulkan_round(dev, data, groups, clocks, "round 1"))
    if cuda is not None:
        report["torch"] = torch_round(data, cuda, args.warmup, clocks)
    report["rounds"].append(vulkan_round(dev, data, groups, clocks, "round 2"))
    t0 = time.time()
    report["dispatch"] = tiny_dispatches(dev, 1000)
    clocks.mark("tiny dispatches", t0, time.time())
    report["clocks"] = clocks.stop(uuid)
    summarise(report)
    (args.out / "kernels_gpu.json").write_text(json.dumps(report, indent=1, default=str))
    return 0


def summarise(report: dict) -> None:
    """The acceptance table: best config per kernel and round, against the best copy and torch."""
    print("\nbest per kernel (GB/s GPU timestamps / wall; x = over the best device copy of that round):")
    torch = report.get("torch", {})
    for r, results in enumerate(report["rounds"], 1):
        copy_gpu = max(v[0] for k in ("vkCmdCopyBuffer", "copy shader") for v in results[k].values())
        copy_wall = max(v[1] for k in ("vkCmdCopyBuffer", "copy shader") for v in results[k].values())
        print(f"round {r}: best device copy {copy_gpu:.1f} / {copy_wall:.1f}")
        for name, configs in results.items():
            config, (g, w, ok) = max(configs.items(), key=lambda kv: kv[1][0])
            ratios = f"x{g / copy_gpu:.3f} / x{w / copy_wall:.3f}"
            print(f"  {name:<24}{config:<8}{g:>9.1f} {w:>9.1f}   {ratios}  {ok}")
    for name, (g, w) in torch.items():
        print(f"  torch {name:<26}{g:>9.1f} {w:>9.1f}")
    print("\n1000 tiny dispatches, per dispatch (us): host recording, GPU (timestamps), "
          "record + submit + wait")
    for name, (host, gpu, wall) in report["dispatch"].items():
        print(f"  {name:<40}{host * 1e6:>8.2f}{gpu * 1e6:>8.2f}{wall * 1e6:>8.2f}")
    for name, text in report.get("clocks", {}).items():
        print(f"  clocks {name}: {text}")


if __name__ == "__main__":
    sys.exit(main())
