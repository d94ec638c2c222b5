"""W3's kernel at narrow rows: what not reading the rows a mask fills, and the order of the loads,
are worth, on one resident block.

W3 at 64-byte rows (`y = x.index_select(0, idx).masked_fill(mask (N, 1), -1.0)`, idx permuting
rows within each 1 GiB block, half the rows masked) stayed at ~2.6 TB/s end to end: select_fill
read each row at random, and random rows up to 64 B are read at ~36-38 G rows/s whatever the
kernel (BENCHMARKS.md, "W3 at 64-byte rows"). This probe times on one resident 1 GiB block, by
GPU timestamps (best and median of `--reps`, copy-shader load before each row), for each
`--row-bytes`:

- the copy shader (the block's rate limit for a read and a write of every byte);
- select_fill (the row walk) reading every row (`skip_filled=False`, as before session 11) and
  not reading a row its mask fills (`skip_filled=True`), with the loads in turn position by
  position (`loads_first=False`) and in passes (`loads_first=True`), each with the (N, 1) mask
  half set and with no row set (nothing to skip: what it costs where the mask does not help);
- index_select alone (every row read at random, nothing filled).

A kernel in source order was timed here too and removed (commit c6144f8 has it,
`select_fill_scatter.comp`): rows read in order and written to idx's inverse permutation. Random
64-byte writes were slower than random reads (BENCHMARKS.md, "W3 at 64-byte rows: skip what the
mask fills").

Every output is poisoned first and compared with numpy bit for bit. TB/s counts x read + y
written (2 x block bytes), as data_path does, whatever a kernel skips.

    python benchmarks/probes/w3_narrow.py --out $OUT                 # the H200 run
    python benchmarks/probes/w3_narrow.py --mib 8 --warmup 0.1 --reps 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))  # the repository root

from benchmarks.kernels import BenchStep, Device, copy_shader
from benchmarks.probes.gpu_clocks import Clocks, vulkan_uuid
from lazyfuel.backends.vulkan.fill_kernels import SelectFillKernel
from lazyfuel.backends.vulkan.kernels import DeviceValue, IndexSelectKernel, StatusSlot
from lazyfuel.backends.vulkan.timestamps import Timestamps
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout, broadcast_to

POISON = 0xA5A5A5A5
FILL = np.float32(-1.0)
HOLD_S = 0.3  # copy-shader load right before each timed row: the SM clock falls within ~1 s of idle


class Block:
    """One resident block of one row width, its indices, masks and output, and timed runs."""

    def __init__(self, dev: Device, mib: int, row_bytes: int, reps: int, rng: np.random.Generator) -> None:
        self.dev, self.pool, self.reps = dev, dev.pool, reps
        self.cols, self.row_words = row_bytes // 4, row_bytes // 16
        self.rows = (mib << 20) // row_bytes
        self.nbytes = self.rows * row_bytes
        self.x = rng.integers(0, 1 << 32, (self.rows, self.cols), dtype=np.uint32).view(np.float32)
        self.idx = rng.permutation(self.rows).astype(np.uint32)
        self.masks = {"half set": rng.random((self.rows, 1)) < 0.5,
                      "none set": np.zeros((self.rows, 1), bool)}
        self.xd = dev.put(self.x)
        self.out = dev.empty(self.nbytes)
        self.idx_d = dev.put(self.idx)
        self.mask_rows = {name: self._row_mask(m) for name, m in self.masks.items()}
        self.status = StatusSlot(dev.empty(256), 0)
        self.got = np.empty((self.rows, self.cols), np.uint32)
        self.stamps = Timestamps(self.pool, 2 * reps)
        p = {"outer_count": 1, "source_dim_size": self.rows, "n_indices": self.rows, "inner_count": self.cols}
        self.sf_step = BenchStep({**p, "fill_bytes": FILL.tobytes()}, (self.rows, self.cols))
        self.is_step = BenchStep(p, (self.rows, self.cols))

    def _row_mask(self, m: np.ndarray) -> DeviceValue:
        """The (N, 1) mask as a user gives it: a broadcast view over (N, C) of N bytes."""
        small = self.dev.put(m)
        return DeviceValue(small.allocation, DType.BOOL, broadcast_to(Layout.of(m), (self.rows, self.cols)))

    def want(self, mask: str | None) -> np.ndarray:
        picked = self.x[self.idx]
        return (picked if mask is None else np.where(self.masks[mask], FILL, picked)).view(np.uint32)

    def tb(self, seconds: float) -> float:
        return 2 * self.nbytes / seconds / 1e12

    def timed(self, record: Callable[[Any], None]) -> tuple[float, float]:
        """(best, median) GPU seconds of `record(batch)` over `reps` repetitions in one command
        buffer, a timestamp pair around each and a barrier between them."""
        with self.pool.batch() as batch:
            self.stamps.reset(batch)
            for r in range(self.reps):
                self.stamps.write(batch, 2 * r)
                record(batch)
                self.stamps.write(batch, 2 * r + 1)
                batch.barrier()
            batch.run()
        t = self.stamps.read(2 * self.reps)
        spans = (t[1::2] - t[0::2]) * 1e-9
        return float(spans.min()), float(statistics.median(spans))

    def poison(self) -> None:
        with self.pool.batch() as batch:
            batch.recorder.fill(self.out.buffer, self.out.offset, self.nbytes, POISON)
            batch.run()

    def bitwise(self, mask: str | None) -> str:
        with self.pool.batch() as batch:
            batch.download(self.out, self.got)
            batch.run()
        return "bitwise ok" if np.array_equal(self.got, self.want(mask)) else "WRONG"

    def select_fill(self, skip: bool, passes: bool, mask: str) -> Callable[[Any], None]:
        kernel = SelectFillKernel(row_walk=True, skip_filled=skip, loads_first=passes)
        return lambda b: kernel.record(b, self.sf_step, [self.xd, self.idx_d, self.mask_rows[mask]], self.out,
                                       self.status)


def warm(block: Block, seconds: float) -> None:
    """Copy-shader load for `seconds` (the GPU idles at 345 MHz and ramps only under load)."""
    end = time.time() + seconds
    while time.time() < end:
        with block.pool.batch() as batch:
            for _ in range(4):
                copy_shader(batch, block.xd.allocation, block.out, block.nbytes)
                batch.barrier()
            batch.run()


def one_width(block: Block, warmup: float, clocks: Clocks) -> dict:
    rows: dict[str, Any] = {}
    tag = f"{block.cols * 4} B rows"

    def row(name: str, record: Callable[[Any], None], mask: str | bool | None = False) -> None:
        if mask is not False:
            block.poison()
        warm(block, HOLD_S)
        t0 = time.time()
        best, median = block.timed(record)
        clocks.mark(f"{tag} {name}", t0, time.time())
        ok = block.bitwise(mask) if mask is not False else ""
        rows[name] = {"best_ms": best * 1e3, "median_ms": median * 1e3, "best_tbs": block.tb(best),
                      "median_tbs": block.tb(median), "check": ok}
        print(f"  {tag:<12}{name:<52}{best * 1e3:>8.3f}{median * 1e3:>8.3f}{block.tb(best):>8.2f}"
              f"{block.tb(median):>8.2f}  {ok}", flush=True)

    t0 = time.time()
    warm(block, warmup)
    clocks.mark(f"{tag} warm-up", t0, time.time())
    row("copy shader", lambda b: copy_shader(b, block.xd.allocation, block.out, block.nbytes))
    for mask in block.masks:
        for passes in (False, True):
            loads = "loads in passes" if passes else "loads in turn"
            row(f"every row read, {loads}, mask {mask}", block.select_fill(False, passes, mask), mask)
            row(f"filled rows not read, {loads}, mask {mask}", block.select_fill(True, passes, mask), mask)
    select = IndexSelectKernel()
    row("index_select alone", lambda b: select.record(b, block.is_step, [block.xd, block.idx_d], block.out,
                                                      block.status), None)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024, help="block size in MiB (default 1024)")
    parser.add_argument("--row-bytes", default="64,128,1024")
    parser.add_argument("--warmup", type=float, default=1.5, help="seconds of copy load per row width")
    parser.add_argument("--reps", type=int, default=24, help="timed repetitions per figure")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp")))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    dev = Device(1, 0.0)
    pool = dev.pool
    uuid = vulkan_uuid(pool)
    clocks = Clocks(args.out / "w3_narrow_clocks.csv")
    print(f"{datetime.now():%Y-%m-%d %H:%M:%S}; {pool.info.name} ({pool.info.driver} "
          f"{pool.info.driver_info}); {'coalesced' if pool.coalesced else 'sequential'} mapping; "
          f"masked_fill shape {pool.groups['masked_fill']}; {args.mib} MiB blocks, {args.reps} reps; "
          f"columns: best ms, median ms, best TB/s, median TB/s (x read + y written)", flush=True)
    rng = np.random.default_rng(18)
    report: dict[str, Any] = {}
    for row_bytes in (int(b) for b in args.row_bytes.split(",")):
        block = Block(dev, args.mib, row_bytes, args.reps, rng)
        report[f"{row_bytes} B rows"] = one_width(block, args.warmup, clocks)
        block.stamps.destroy()
        dev.free()
    report["clocks"] = clocks.stop(uuid)
    for name, text in report["clocks"].items():
        print(f"  clocks {name}: {text}")
    (args.out / "w3_narrow.json").write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
