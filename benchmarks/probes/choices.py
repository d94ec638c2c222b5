"""The planner's measured choices on this device: the judge's costs and the plans they pick (issue 5).

Run after `python -m lazyfuel judge --quick` (the `choices` stage of benchmarks/gpu_run.sh does
both). Prints, for F32 on the Vulkan device:

1. the judge's fitted line of each binding compared below (the clock it was timed by: `kernel` =
   GPU timestamps around the program's steps, uploads and downloads left out; latency, device-side
   GB/s, the dense view's GB/s where a binding was also timed on a transposed view (the copy
   shader: it prices a dense view), spread, and the GB/s of each ladder rung): the two Contiguize
   bindings (one vkCmdCopyBuffer of a dense view, and the copy shader) and the two index_select bindings
   (contiguous and strided-reading); then the device's transfer term, which every Vulkan program
   pays once besides its steps (submit and wait; host-to-device and device-to-host per array and
   GB/s, in the pool's transfer mode) and what it comes to for the plans of section 3;
2. both Contiguize bindings timed on the device on a dense view at a start offset (rows 1.. of a
   (rows + 1, 1024) array, `--n` elements in all; buffers resident, `--reps` copies recorded into one
   command buffer, best of about a second), and the copy shader on a transposed view for reference;
3. `lf.explain` of (a) `x[1:].contiguous()` on that array, which Contiguize binding the planner
   takes, and (b) `index_select` of a transposed (`--side`, `--side`) source, the strided kernel vs
   Contiguize + the contiguous kernel, each with the costs compared.

Plans are made with LAZYFUEL_BACKEND=vulkan (set here unless given) so the Vulkan decisions show.
Needs neither dask.distributed nor zarr nor glslc.

    python benchmarks/probes/choices.py                    # 64M f32, a 4096 x 4096 transposed source
    python benchmarks/probes/choices.py --n 16777216 --side 2048
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from datetime import date
from types import SimpleNamespace

os.environ.setdefault("LAZYFUEL_BACKEND", "vulkan")

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))  # the repository root
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))  # benchmarks/: kernels.py

from kernels import Device, gbs

import lazyfuel as lf
from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.judged_costs import device_fingerprint, measured_costs
from lazyfuel.providers import default_registry
from lazyfuel.registry import Binding

COPY, SHADER = "vulkan-copy-buffer", "lazyfuel-glsl"
CONTIGUOUS, STRIDED = "vulkan-slang", "lazyfuel-glsl-strided"
COLS = 1024


def binding(op: OpKind, source: str) -> Binding:
    """The F32 Vulkan binding of `op` from kernel source `source`."""
    return next(b for b in default_registry().bindings() if b.op_kind is op and b.backend is Backend.Vulkan
                and b.dtypes[0] is DType.F32 and b.kernel_source == source)


def judged(n: int, side: int) -> None:
    """Section 1: the judge's fitted line of each binding compared, and its rungs."""
    compared = [binding(OpKind.Contiguize, COPY), binding(OpKind.Contiguize, SHADER),
                binding(OpKind.IndexSelect, CONTIGUOUS), binding(OpKind.IndexSelect, STRIDED)]
    costs = measured_costs(default_registry(), [Backend.Vulkan])
    print("\n## the judge's measurements (F32; run `python -m lazyfuel judge --quick` first)\n")
    print("| binding | kernel_source | clock | latency | GB/s (fitted) | GB/s dense view | spread "
          "| GB/s per rung (elements) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for b in compared:
        j = costs.judgement(b)
        if j is None:
            print(f"| {b.contract.kernel} | {b.kernel_source} | not measured | | | | | |")
            continue
        rungs = ", ".join(f"{gbs(p.bytes_moved, p.seconds):.2f} ({p.n})" for p in j.points)
        dense = "" if not j.dense_seconds_per_byte else f"{1e-9 / j.dense_seconds_per_byte:.2f}"
        print(f"| {b.contract.kernel} | {b.kernel_source} | {j.clock} | {j.latency_s * 1e6:.1f} µs "
              f"| {j.bytes_per_s / 1e9:.2f} | {dense} | {j.spread:.0%} | {rungs} |")
    t = costs.transfers.get(Backend.Vulkan)
    print("\n### the transfer term (paid once per program, besides its steps)\n")
    if t is None:
        print("not measured (run `python -m lazyfuel judge --quick`)")
        return
    print("| mode | submit + wait | host to device | device to host | spread |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| {t.mode} | {t.submit_s * 1e6:.1f} µs | {t.up_fixed_s * 1e6:.1f} µs + "
          f"{t.up_bytes_per_s / 1e9:.2f} GB/s per array | {t.down_fixed_s * 1e6:.1f} µs + "
          f"{t.down_bytes_per_s / 1e9:.2f} GB/s per array | {t.spread:.0%} |")
    for name, up, down in ((f"x[1:].contiguous() of {n} f32", [(n + COLS) * 4], [n * 4]),
                           (f"index_select of a ({side}, {side}) f32 source", [side * side * 4, side * 4],
                            [side * side * 4])):
        print(f"\n{name}: transfers ~{t.seconds(up, down) * 1e3:.2f} ms "
              f"({sum(up) / 2**20:.0f} MiB in, {sum(down) / 2**20:.0f} MiB out)", end="")
    print()


def timed(n: int, reps: int) -> None:
    """Section 2: both Contiguize bindings on the device, on the same dense view at a start offset."""
    rows = max(n // COLS, 1)
    dev = Device(reps, 1.0)
    try:
        x = np.random.default_rng(0).standard_normal((rows + 1, COLS)).astype(np.float32)
        xd = dev.put(x)
        out = dev.empty(rows * COLS * 4)
        moved = 2 * rows * COLS * 4
        dense = SimpleNamespace(param={"shape": (rows, COLS), "strides": (COLS, 1), "offset": COLS})
        side = int(np.sqrt(rows * COLS))
        transposed = SimpleNamespace(param={"shape": (side, side), "strides": (1, side), "offset": 0})
        print(f"\n## Contiguize on the device: x[1:] of a ({rows + 1}, {COLS}) f32 array "
              f"({rows * COLS * 4 / 2**20:.0f} MiB copied), {reps} per command buffer\n")
        print("| binding | view | GB/s |")
        print("| --- | --- | --- |")
        for source, step, view, bytes_moved in ((COPY, dense, "dense, offset 1 row", moved),
                                                (SHADER, dense, "dense, offset 1 row", moved),
                                                (SHADER, transposed, f"transposed ({side}, {side})",
                                                 2 * side * side * 4)):
            kernel = binding(OpKind.Contiguize, source).kernel_ref.impl
            seconds = dev.time(lambda batch, k=kernel, s=step: k.record(batch, s, [xd], out, None))
            print(f"| {binding(OpKind.Contiguize, source).contract.kernel} [{source}] | {view} "
                  f"| {gbs(bytes_moved, seconds):.2f} |")
    finally:
        dev.free()


def explained(n: int, side: int) -> None:
    """Section 3: the plans and the costs compared, as `lf.explain` prints them."""
    rows = max(n // COLS, 1)
    x = np.zeros((rows + 1, COLS), np.float32)
    print("\n## (a) Contiguize of a dense view at a start offset: x[1:].contiguous()\n")
    print(lf.explain(lf.contiguous(lf.from_array(x, chunks=x.shape)[1:])))
    del x
    source = np.zeros((side, side), np.float32)
    idx = np.random.default_rng(1).permutation(side).astype(np.uint32)
    print(f"\n## (b) index_select(x.T, 0, {side} indices), x ({side}, {side}) f32: the strided kernel "
          "vs Contiguize + the contiguous kernel\n")
    print(lf.explain(lf.index_select(lf.from_array(source, chunks=source.shape).T, 0, idx)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1 << 26, help="f32 elements of the dense view")
    parser.add_argument("--side", type=int, default=4096, help="extent of the transposed source")
    parser.add_argument("--reps", type=int, default=4, help="copies recorded per command buffer")
    args = parser.parse_args(argv)
    print(f"# choices.py, {date.today()}, {platform.node()}: {device_fingerprint(Backend.Vulkan)}")
    judged(max(args.n // COLS, 1) * COLS, args.side)
    timed(args.n, args.reps)
    explained(args.n, args.side)
    return 0


if __name__ == "__main__":
    sys.exit(main())
