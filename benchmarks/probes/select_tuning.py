"""The select kernels on lavapipe (or any Vulkan device) under several specialisations, side by side.

For each op at `--elements` f32 (default 64M): the dense copy shader (contiguize's module at
rank 1, 16-byte words), index_select of rows (256 elements, dim 0) and of single elements,
gather along the last dim of [n/256, 256], masked_fill, contiguize of a transposed square, and
vkCmdCopyBuffer as the device's ceiling. Each configuration `L<workgroup>/E<elements per
invocation>/<s|c>` (s: sequential mapping, c: coalesced; `table`: the pool's own per-device
choices, launch_shapes.py; a `/general` suffix turns index_select's aligned-row path off) runs once per
round, interleaved with the others, and the figure is the median over rounds (the VM is shared:
compare within a run). GB/s counts bytes read + written + index or mask bytes, as
benchmarks/kernels.py does. Outputs are checked against numpy once.

    python benchmarks/probes/select_tuning.py --rounds 5                       # the default grid
    python benchmarks/probes/select_tuning.py --configs L64/E4/s,table --elements 16777216
    python benchmarks/probes/select_tuning.py --before main --configs before,table   # vs main's shaders

`--before REV` takes the committed SPIR-V of git revision REV: the config `before` then runs
those modules with 64 x 4 groups, the sequential mapping and no aligned-row path (what main
ran on lavapipe before tuning), in the same process as the others; `before+CONFIG` runs them with
CONFIG (e.g. `before+table`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))  # benchmarks/: kernels.py
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))  # the repository root

from kernels import BenchStep, Device, copy_shader

import lazyfuel.backends.vulkan.compute_pipelines as compute_pipelines
from lazyfuel.backends.vulkan.fill_kernels import MaskedFillKernel
from lazyfuel.backends.vulkan.kernels import (
    ContiguizeKernel,
    GatherKernel,
    IndexSelectKernel,
    StatusSlot,
)

DEFAULT_CONFIGS = "L64/E4/s,L64/E4/c,L64/E1/s,L64/E16/s,L256/E4/s,L256/E16/s,L1024/E4/s,L32/E4/s"
OPS = ("vkCmdCopyBuffer", "copy_shader", "index_select_rows", "index_select_rows_in_order",
       "index_select_elements", "gather", "masked_fill", "contiguize_xT")
Setup = tuple[Callable[[Any], None], int, Any]


def setups(dev: Device, n: int, rng: np.random.Generator) -> dict[str, Setup]:
    """op -> (record(batch), bytes moved, (output allocation, expected bytes) or None)."""
    w, inner = 4, 256
    x = rng.integers(0, 256, n * w, dtype=np.uint8).view(np.uint32)
    xd = dev.put(x)
    out = dev.empty(n * w)
    slot = StatusSlot(dev.empty(256), 0)
    rows = n // inner
    ops: dict[str, tuple[Callable[[Any], None], int, Any]] = {}
    ops["vkCmdCopyBuffer"] = (lambda b: b.copy(xd.allocation, 0, out, 0, n * w), 2 * n * w, (out, x))

    ops["copy_shader"] = (lambda b: copy_shader(b, xd.allocation, out, n * w), 2 * n * w, (out, x))
    side = int(np.sqrt(n))
    step_t = BenchStep({"shape": (side, side), "strides": (1, side), "offset": 0}, (side, side))
    ops["contiguize_xT"] = (lambda b: ContiguizeKernel().record(b, step_t, [xd], out, None),
                            2 * side * side * w, (out, x[: side * side].reshape(side, side).T))

    idx = rng.integers(0, rows, rows).astype(np.uint32)
    idx_d = dev.put(idx)
    step = BenchStep({"outer_count": 1, "source_dim_size": rows, "n_indices": rows, "inner_count": inner},
                     (rows, inner))
    ops["index_select_rows"] = (lambda b: _select().record(b, step, [xd, idx_d], out, slot),
                                2 * n * w + 4 * rows, (out, x.reshape(rows, inner)[idx]))
    ident = np.arange(rows, dtype=np.uint32)
    ident_d = dev.put(ident)
    ops["index_select_rows_in_order"] = (
        lambda b: _select().record(b, step, [xd, ident_d], out, slot), 2 * n * w + 4 * rows,
        (out, x))
    idx_e = rng.integers(0, n, n).astype(np.uint32)
    idx_ed = dev.put(idx_e)
    step_e = BenchStep({"outer_count": 1, "source_dim_size": n, "n_indices": n, "inner_count": 1}, (n,))
    ops["index_select_elements"] = (lambda b: _select().record(b, step_e, [xd, idx_ed], out, slot),
                                    2 * n * w + 4 * n, (out, x[idx_e]))
    g_idx = rng.integers(0, inner, (rows, inner)).astype(np.uint32)
    g_idx_d = dev.put(g_idx)
    step_g = BenchStep({"source_shape": (rows, inner), "output_shape": (rows, inner), "dim": 1},
                       (rows, inner))
    ops["gather"] = (lambda b: GatherKernel().record(b, step_g, [xd, g_idx_d], out, slot),
                     3 * n * w, (out, np.take_along_axis(x.reshape(rows, inner), g_idx.astype(np.intp), 1)))
    mask = rng.integers(0, 2, n).astype(bool)
    mask_d = dev.put(mask)
    step_m = BenchStep({"fill_bytes": bytes(w)}, (n,))
    ops["masked_fill"] = (lambda b: MaskedFillKernel().record(b, step_m, [xd, mask_d], out, None),
                          2 * n * w + n, (out, np.where(mask, np.uint32(0), x)))
    return ops


BEFORE = {"on": False}  # the `before` config is running: modules come from --before's SPIR-V
ALIGNED = {"on": True}  # index_select's aligned-rows variant (off for the `/general` configs)


def _select() -> IndexSelectKernel:
    """The index_select kernel of the config being recorded: aligned rows, or the general path (the
    index_select_general binding's kernel) for the `/general` configs."""
    return IndexSelectKernel(aligned_rows=ALIGNED["on"])


def use_before(pool: Any, revision: str, folder: Path) -> None:
    """Extract revision's committed SPIR-V into `folder`; while BEFORE is on, the pool's pipelines
    are built from those modules (named `before:<module>` so both sets live side by side)."""
    listing = subprocess.run(["git", "ls-tree", "--name-only", revision, "lazyfuel/backends/vulkan/spirv/"],
                             check=True, capture_output=True, text=True).stdout.split()
    for path in listing:
        blob = subprocess.run(["git", "show", f"{revision}:{path}"], check=True, capture_output=True).stdout
        (folder / Path(path).name).write_bytes(blob)
    read, get = compute_pipelines.spirv, pool.pipelines.get
    compute_pipelines.spirv = lambda name: ((folder / f"{name[7:]}.spv").read_bytes()
                                        if name.startswith("before:") else read(name))
    pool.pipelines.get = lambda name, spec: get(f"before:{name}" if BEFORE["on"] else name, spec)


def configure(pool: Any, config: str, table: tuple[dict, bool]) -> None:
    """Set every family's (workgroup, elements per invocation) and the pool's mapping; `table`
    restores the pool's own choices (launch_shapes.py); `before` runs --before's modules as main did."""
    BEFORE["on"] = config.startswith("before")
    if config == "before":
        config = "L64/E4/s/general"
    config = config.removeprefix("before+")  # before+table: --before's modules, today's groups
    ALIGNED["on"] = not config.endswith("/general")  # off: the index_select_general binding's kernel
    config = config.removesuffix("/general")
    if config == "table":
        pool.groups.update(table[0])
        pool.coalesced = table[1]
        return
    local, elems, mapping = config.split("/")
    for family in pool.groups:
        pool.groups[family] = (int(local[1:]), int(elems[1:]))
    pool.coalesced = mapping == "c"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=64 << 20, help="f32 elements per buffer")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--configs", default=DEFAULT_CONFIGS)
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--before", help="git revision whose SPIR-V the `before` config runs")
    args = parser.parse_args(argv)
    dev = Device(reps=1, seconds=0)
    pool = dev.pool
    before_dir = tempfile.TemporaryDirectory()
    if args.before:
        use_before(pool, args.before, Path(before_dir.name))
    saved = (dict(pool.groups), pool.coalesced)
    ops = setups(dev, args.elements, np.random.default_rng(0))
    wanted = args.ops.split(",")
    configs = args.configs.split(",")
    cells = [(op, c) for op in wanted for c in (configs if op != "vkCmdCopyBuffer" else ["-"])]
    times: dict[tuple[str, str], list[float]] = {cell: [] for cell in cells}
    for r in range(args.rounds + 1):  # round 0 warms up (pipeline builds) and checks outputs
        for op, config in cells:
            record, _, expect = ops[op]
            if config != "-":
                configure(pool, config, saved)
            with pool.batch() as batch:
                record(batch)
                t = time.perf_counter()
                batch.run()
                dt = time.perf_counter() - t
            if r == 0:
                check(pool, op, config, *expect)
            else:
                times[(op, config)].append(dt)
    configure(pool, "table", saved)
    info = pool.info
    print(f"device: {info.name} ({info.driver_info}); {os.cpu_count()} CPUs; load average after "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.elements} f32; median of {args.rounds}")
    print(f"{'op':<28}{'config':<14}{'GB/s':>8}{'min ms':>9}{'median ms':>11}")
    for (op, config), ts in times.items():
        med = statistics.median(ts)
        print(f"{op:<28}{config:<14}{ops[op][1] / med / 1e9:8.2f}{min(ts) * 1e3:9.1f}{med * 1e3:11.1f}")
    dev.free()
    return 0


def check(pool: Any, op: str, config: str, out: Any, expect: np.ndarray) -> None:
    got = np.empty(expect.nbytes, np.uint8)
    with pool.batch() as batch:
        batch.download(out, got)
        batch.run()
    if not np.array_equal(got, np.ascontiguousarray(expect).reshape(-1).view(np.uint8)):
        raise SystemExit(f"{op} with {config}: output differs from numpy")


if __name__ == "__main__":
    sys.exit(main())
