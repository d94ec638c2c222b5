"""W3's kernel alone: one resident 1 GiB block through select_fill, against the copy shader.

Issue 18's W3 (`y = x.index_select(0, idx).masked_fill(mask (N, 1), -1.0)` over 16 GiB resident
f32 in 1 GiB blocks) ran at 1.27-1.39 TB/s end to end where the copy shader reaches ~4.2 TB/s.
This probe times the kernels on resident buffers, by GPU timestamps around each dispatch (a
barrier between repetitions; best and median of `--reps` after `--warmup` s of copy-shader load,
and `HOLD_S` s more right before each figure: the H200's SM clock falls within a second of
idle, and the first run of this probe (BENCHMARKS.md) timed its later rows at 345-990 MHz),
for rows of each `--row-bytes`:

- the copy shader (contiguize, 16-byte words) and vkCmdCopyBuffer on the same buffers;
- select_fill with the (N, 1) mask read in place: the general path (five runtime divisions per
  word, `SelectFillKernel(row_walk=False)`, main's) and the row walk (`row_walk=True`), each under
  every launch shape of `--groups` (select_fill runs masked_fill's family shape), and the row walk
  with a dense resident (N, C) mask;
- index_select alone and masked_fill alone (its (N, 1) mask read in place);
- the same kernels rotated in one command buffer after `COLD_S` s idle (the SM clock fallen, as
  between W3's computes): how each one's time follows the clock;
- 4 blocks in one command buffer (4 separate x / y buffers), with and without a barrier between
  the dispatches, and 4 blocks on 4 queues at once (4 command buffers submitted together: the span
  from the first start stamp to the last end stamp);

with `nvidia-smi` sampling the SM and memory clocks every 100 ms meanwhile (per-row clock ranges).

With `--narrow` (stage `w3narrow`; row widths 64, 128, 1024 B by default) it times instead what
decision 109 settled: select_fill's row walk reading every row (`skip_filled=False`, as before
session 11) against not reading the rows its mask fills, with its loads in turn position by
position (`loads_first=False`) against in passes, the (N, 1) mask half set and with no row set
(nothing to skip), beside the copy shader and index_select alone. A kernel in source order was
timed that way too and removed (`select_fill_scatter.comp`, commit c6144f8: rows read in order,
written to idx's inverse permutation; random 64-byte writes were slower than random reads).

The dense-mask, masked_fill, cold and 4-block rows run only at the row widths of `--extras`. A
kernel shaped for narrow rows (`select_fill_rows.comp`, commit bc50257: lanes per row, rows per
invocation, every load before any store) was timed here at 16-128 B rows and removed: at best
2.5 % under select_fill (BENCHMARKS.md, "W3 at 64-byte rows: a kernel for narrow rows").
Every select_fill variant's output is poisoned first and compared with numpy bit for bit. TB/s
counts x read + y written (2 x block bytes); index and mask bytes are left out, as in data_path.

    python benchmarks/probes/w3_kernel_probe.py --out $OUT                 # the H200 run
    python benchmarks/probes/w3_kernel_probe.py --mib 8 --warmup 0.1 --reps 3 --groups 64x4
    python benchmarks/probes/w3_kernel_probe.py --narrow --mib 8 --warmup 0.1 --reps 3
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
from lazyfuel.backends.vulkan.fill_kernels import MaskedFillKernel, SelectFillKernel
from lazyfuel.backends.vulkan.kernels import DeviceValue, IndexSelectKernel, StatusSlot
from lazyfuel.backends.vulkan.timestamps import Timestamps
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout, broadcast_to

POISON = 0xA5A5A5A5
FILL = np.float32(-1.0)
BLOCKS = 4
HOLD_S = 0.3  # copy-shader load right before each timed row: the SM clock falls within ~1 s of idle
# idle before the cold rotation: the H200's SM clock decays from 1980 to ~345 MHz in ~4 s
COLD_S = float(os.environ.get("W3K_COLD_S", "3.0"))


class Probe:
    """Resident buffers of one row width and the timed runs over them."""

    def __init__(self, dev: Device, mib: int, row_bytes: int, reps: int, rng: np.random.Generator) -> None:
        self.dev, self.pool, self.reps = dev, dev.pool, reps
        self.cols = row_bytes // 4
        self.rows = (mib << 20) // row_bytes
        self.nbytes = self.rows * row_bytes
        self.x = rng.integers(0, 1 << 32, (self.rows, self.cols), dtype=np.uint32).view(np.float32)
        self.idx = rng.permutation(self.rows).astype(np.uint32)
        self.row_mask = rng.random((self.rows, 1)) < 0.5
        self.no_mask = np.zeros((self.rows, 1), bool)
        self.xs = [dev.put(self.x) for _ in range(BLOCKS)]
        self.outs = [dev.empty(self.nbytes) for _ in range(BLOCKS)]
        self.idx_d = dev.put(self.idx)
        # the (N, 1) masks as a user gives them: broadcast views over (N, C) of N bytes
        self.mask_rows, self.mask_none = (
            DeviceValue(dev.put(m).allocation, DType.BOOL, broadcast_to(Layout.of(m), (self.rows, self.cols)))
            for m in (self.row_mask, self.no_mask))
        self._dense: DeviceValue | None = None
        self.status = StatusSlot(dev.empty(256), 0)
        picked = self.x[self.idx].view(np.uint32)
        self.want = {True: np.where(self.row_mask, FILL, self.x[self.idx]).view(np.uint32), False: picked}
        self.got = np.empty((self.rows, self.cols), np.uint32)
        self.stamps = Timestamps(self.pool, 2 * max(reps, BLOCKS))
        p = {"outer_count": 1, "source_dim_size": self.rows, "n_indices": self.rows, "inner_count": self.cols}
        self.sf_step = BenchStep({**p, "fill_bytes": FILL.tobytes()}, (self.rows, self.cols))
        self.is_step = BenchStep(p, (self.rows, self.cols))
        self.mf_step = BenchStep({"fill_bytes": FILL.tobytes()}, (self.rows, self.cols))

    def tb(self, seconds: float) -> float:
        return 2 * self.nbytes / seconds / 1e12

    def timed(self, record: Callable[[Any, int], None]) -> tuple[float, float]:
        """(best, median) GPU seconds of `record(batch, block)` over `reps` repetitions, one command
        buffer, a timestamp pair around each and a barrier between them."""
        with self.pool.batch() as batch:
            self.stamps.reset(batch)
            for r in range(self.reps):
                self.stamps.write(batch, 2 * r)
                record(batch, r % BLOCKS)
                self.stamps.write(batch, 2 * r + 1)
                batch.barrier()
            batch.run()
        t = self.stamps.read(2 * self.reps)
        spans = (t[1::2] - t[0::2]) * 1e-9
        return float(spans.min()), float(statistics.median(spans))

    def four_in_one(self, record: Callable[[Any, int], None], barriers: bool) -> float:
        """Best GPU seconds per block of 4 blocks recorded into one command buffer."""
        best = float("inf")
        for _ in range(max(3, self.reps // BLOCKS)):
            with self.pool.batch() as batch:
                self.stamps.reset(batch)
                self.stamps.write(batch, 0)
                for b in range(BLOCKS):
                    record(batch, b)
                    if barriers:
                        batch.barrier()
                self.stamps.write(batch, 1)
                batch.run()
            t = self.stamps.read(2)
            best = min(best, (t[1] - t[0]) * 1e-9 / BLOCKS)
        return best

    def four_queues(self, record: Callable[[Any, int], None]) -> tuple[float, list[int]]:
        """Best GPU seconds per block of 4 command buffers (one block each) submitted together,
        each to its context's queue: first start stamp to last end stamp, over 4. Also the slots."""
        stamps = [Timestamps(self.pool, 2) for _ in range(BLOCKS)]
        best, slots = float("inf"), []
        for _ in range(max(3, self.reps // BLOCKS)):
            batches = [self.pool.batch() for _ in range(BLOCKS)]
            slots = [b.context.queue_slot for b in batches]
            for b, (batch, s) in enumerate(zip(batches, stamps)):
                s.reset(batch)
                s.write(batch, 0)
                record(batch, b)
                s.write(batch, 1)
            for batch in batches:
                batch.start()
            for batch in batches:
                batch.finish()
                batch.close()
            t = np.array([s.read(2) for s in stamps])
            best = min(best, (t[:, 1].max() - t[:, 0].min()) * 1e-9 / BLOCKS)
        for s in stamps:
            s.destroy()
        return best, slots

    def poison(self) -> None:
        with self.pool.batch() as batch:
            for out in self.outs:
                batch.recorder.fill(out.buffer, out.offset, self.nbytes, POISON)
            batch.fill_u32(self.status.allocation, 0xFFFFFFFF, 4)
            batch.run()

    def bitwise(self, block: int = 0, fill: bool = True) -> str:
        """Block `block`'s output against numpy, every bit (the whole block)."""
        with self.pool.batch() as batch:
            batch.download(self.outs[block], self.got)
            batch.run()
        return "bitwise ok" if np.array_equal(self.got, self.want[fill]) else "WRONG"

    def select_fill(self, walk: bool, dense: bool = False, none: bool = False,
                    **switches: bool) -> Callable[[Any, int], None]:
        """select_fill (`SelectFillKernel(row_walk=walk, **switches)`) with the (N, 1) mask half
        set, the dense (N, C) one, or the (N, 1) mask with no row set (`none`: checked by
        `bitwise(fill=False)`)."""
        kernel = SelectFillKernel(row_walk=walk, **switches)
        mask = self.dense_mask() if dense else self.mask_none if none else self.mask_rows
        return lambda b, k: kernel.record(b, self.sf_step, [self.xs[k], self.idx_d, mask], self.outs[k],
                                          self.status)

    def dense_mask(self) -> DeviceValue:
        """The (N, C) mask, resident (made on first use: only the extras rows read it)."""
        if self._dense is None:
            self._dense = self.dev.put(np.ascontiguousarray(np.broadcast_to(self.row_mask,
                                                                            (self.rows, self.cols))))
        return self._dense


def warm(probe: Probe, seconds: float) -> None:
    """Copy-shader load for `seconds` (the GPU idles at 345 MHz and ramps only under load)."""
    end = time.time() + seconds
    while time.time() < end:
        with probe.pool.batch() as batch:
            for k in range(BLOCKS):
                copy_shader(batch, probe.xs[k].allocation, probe.outs[k], probe.nbytes)
                batch.barrier()
            batch.run()


class Rows:
    """The timed rows of one row width: each printed as it is measured and kept by name."""

    def __init__(self, probe: Probe, clocks: Clocks, warmup: float) -> None:
        self.probe, self.clocks, self.found = probe, clocks, {}
        self.tag = f"{probe.cols * 4} B rows"
        t0 = time.time()
        warm(probe, warmup)
        clocks.mark(f"{self.tag} warm-up", t0, time.time())

    def __call__(self, name: str, record: Callable[[Any, int], None],
                 check: Callable[[], str] | None = None) -> None:
        """Time `record` (best and median GPU ms, TB/s), the output poisoned first and checked
        after where `check` is given."""
        probe, tag = self.probe, self.tag
        if check is not None:
            probe.poison()
        warm(probe, HOLD_S)  # the host work of the last row let the clock fall: back to working clock
        t0 = time.time()
        best, median = probe.timed(record)
        self.clocks.mark(f"{tag} {name}", t0, time.time())
        ok = check() if check is not None else ""
        self.found[name] = {"best_ms": best * 1e3, "median_ms": median * 1e3, "best_tbs": probe.tb(best),
                            "median_tbs": probe.tb(median), "check": ok}
        print(f"  {tag:<12}{name:<52}{best * 1e3:>8.3f}{median * 1e3:>8.3f}{probe.tb(best):>8.2f}"
              f"{probe.tb(median):>8.2f}  {ok}", flush=True)


def narrow(probe: Probe, warmup: float, clocks: Clocks) -> dict:
    """`--narrow`'s rows at one width: filled rows read or not, loads in turn or in passes, the
    mask half set or none set, beside the copy shader and index_select alone (decision 109)."""
    row = Rows(probe, clocks, warmup)
    row("copy shader", lambda b, k: copy_shader(b, probe.xs[k].allocation, probe.outs[k], probe.nbytes))
    for none in (False, True):
        check = (lambda: probe.bitwise(fill=False)) if none else probe.bitwise
        for passes in (False, True):
            tail = f"loads {'in passes' if passes else 'in turn'}, mask {'none' if none else 'half'} set"
            for skip in (False, True):
                name = f"{'filled rows not read' if skip else 'every row read'}, {tail}"
                row(name, probe.select_fill(True, none=none, skip_filled=skip, loads_first=passes), check)
    select = IndexSelectKernel()
    row("index_select alone", lambda b, k: select.record(
        b, probe.is_step, [probe.xs[k], probe.idx_d], probe.outs[k], probe.status),
        lambda: probe.bitwise(fill=False))
    return row.found


def one_width(probe: Probe, groups: list[tuple[int, int]], warmup: float, clocks: Clocks,
              extras: bool) -> dict:
    pool = probe.pool
    row = Rows(probe, clocks, warmup)
    rows, tag = row.found, row.tag
    default = pool.groups["masked_fill"]
    row("vkCmdCopyBuffer", lambda b, k: b.copy(probe.xs[k].allocation, 0, probe.outs[k], 0, probe.nbytes))
    row("copy shader", lambda b, k: copy_shader(b, probe.xs[k].allocation, probe.outs[k], probe.nbytes))
    for local, elems in groups:
        pool.groups["masked_fill"] = (local, elems)
        shape = f"{local}x{elems}"
        row(f"select_fill general, (N,1) mask, {shape}", probe.select_fill(False), probe.bitwise)
        row(f"select_fill row walk, (N,1) mask, {shape}", probe.select_fill(True), probe.bitwise)
    pool.groups["masked_fill"] = default
    select = IndexSelectKernel()
    row("index_select alone", lambda b, k: select.record(
        b, probe.is_step, [probe.xs[k], probe.idx_d], probe.outs[k], probe.status),
        lambda: probe.bitwise(fill=False))
    if not extras:
        return rows
    row("select_fill row walk, dense (N,C) mask", probe.select_fill(True, dense=True), probe.bitwise)
    fill = MaskedFillKernel()
    row("masked_fill alone, (N,1) mask", lambda b, k: fill.record(
        b, probe.mf_step, [probe.xs[k], probe.mask_rows], probe.outs[k], None))
    rows.update(cold(probe, select, fill, clocks, tag))
    for walk in (False, True):
        name = "row walk" if walk else "general"
        for barriers in (True, False):
            warm(probe, HOLD_S)
            t0 = time.time()
            per = probe.four_in_one(probe.select_fill(walk), barriers)
            label = f"4 blocks, 1 cmd buffer, {'barriers' if barriers else 'no barriers'}, {name}"
            clocks.mark(f"{tag} {label}", t0, time.time())
            rows[label] = {"best_ms": per * 1e3, "best_tbs": probe.tb(per)}
            print(f"  {tag:<12}{label:<44}{per * 1e3:>8.3f}{'':>8}{probe.tb(per):>8.2f}  per block",
                  flush=True)
        warm(probe, HOLD_S)
        t0 = time.time()
        per, slots = probe.four_queues(probe.select_fill(walk))
        label = f"4 blocks on 4 queues at once, {name}"
        clocks.mark(f"{tag} {label}", t0, time.time())
        rows[label] = {"best_ms": per * 1e3, "best_tbs": probe.tb(per), "queue_slots": slots}
        print(f"  {tag:<12}{label:<44}{per * 1e3:>8.3f}{'':>8}{probe.tb(per):>8.2f}  per block, "
              f"queue slots {slots}", flush=True)
    return rows


def cold(probe: Probe, select: IndexSelectKernel, fill: MaskedFillKernel, clocks: Clocks, tag: str) -> dict:
    """After `COLD_S` s idle (the SM clock falls, as between W3's computes), one command buffer
    rotating the kernels 3 times: each one's GPU ms at the same (low, rising) clock."""
    kernels = {"copy shader": lambda b, k: copy_shader(b, probe.xs[k].allocation, probe.outs[k],
                                                       probe.nbytes),
               "select_fill general": probe.select_fill(False),
               "select_fill row walk": probe.select_fill(True),
               "index_select alone": lambda b, k: select.record(
                   b, probe.is_step, [probe.xs[k], probe.idx_d], probe.outs[k], probe.status),
               "masked_fill alone": lambda b, k: fill.record(
                   b, probe.mf_step, [probe.xs[k], probe.mask_rows], probe.outs[k], None)}
    names = list(kernels) * 3
    stamps = Timestamps(probe.pool, 2 * len(names))
    time.sleep(COLD_S)
    t0 = time.time()
    with probe.pool.batch() as batch:
        stamps.reset(batch)
        for i, name in enumerate(names):
            stamps.write(batch, 2 * i)
            kernels[name](batch, i % BLOCKS)
            stamps.write(batch, 2 * i + 1)
            batch.barrier()
        batch.run()
    clocks.mark(f"{tag} cold rotation", t0, time.time())
    t = stamps.read()
    stamps.destroy()
    ms = (t[1::2] - t[0::2]) * 1e-6
    found = {}
    for name in kernels:
        runs = [float(m) for n, m in zip(names, ms) if n == name]
        found[f"cold: {name}"] = {"ms_in_order": runs}
        print(f"  {tag:<12}{'cold: ' + name:<44}" + "".join(f"{m:>8.3f}" for m in runs)
              + f"  ms, rounds 1-3 (after {COLD_S:.0f} s idle)", flush=True)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024, help="block size in MiB (default 1024)")
    parser.add_argument("--row-bytes", default="",
                        help="row widths, bytes (default 1024,64; with --narrow 64,128,1024)")
    parser.add_argument("--narrow", action="store_true",
                        help="time decision 109's rows (filled rows read or not, loads in turn or in passes)")
    parser.add_argument("--warmup", type=float, default=1.5, help="seconds of copy load per row width")
    parser.add_argument("--reps", type=int, default=24, help="timed repetitions per figure")
    parser.add_argument("--groups", default="64x4,128x4,256x4,64x8,64x16,512x4")
    parser.add_argument("--extras", default="1024,64",
                        help="row widths that also run the dense mask, masked_fill, cold and 4-block rows")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp")))
    args = parser.parse_args(argv)
    groups = [tuple(int(v) for v in g.split("x")) for g in args.groups.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    dev = Device(1, 0.0)
    pool = dev.pool
    uuid = vulkan_uuid(pool)
    clocks = Clocks(args.out / "w3_kernel_clocks.csv")
    print(f"{datetime.now():%Y-%m-%d %H:%M:%S}; {pool.info.name} ({pool.info.driver} "
          f"{pool.info.driver_info}); "
          f"{'coalesced' if pool.coalesced else 'sequential'} mapping; default shapes {dict(pool.groups)}; "
          f"{len(pool.queues)} queues; {args.mib} MiB blocks, {args.reps} reps; columns: best ms, "
          f"median ms, best TB/s, median TB/s (x read + y written)", flush=True)
    rng = np.random.default_rng(18)
    report: dict[str, Any] = {}
    widths = args.row_bytes or ("64,128,1024" if args.narrow else "1024,64")
    for row_bytes in (int(b) for b in widths.split(",")):
        probe = Probe(dev, args.mib, row_bytes, args.reps, rng)
        report[f"{row_bytes} B rows"] = (narrow(probe, args.warmup, clocks) if args.narrow else
                                         one_width(probe, groups, args.warmup, clocks,
                                                   str(row_bytes) in args.extras.split(",")))
        probe.stamps.destroy()
        dev.free()
    report["clocks"] = clocks.stop(uuid)
    for name, text in report["clocks"].items():
        print(f"  clocks {name}: {text}")
    name = "w3_narrow" if args.narrow else "w3_kernel_probe"
    (args.out / f"{name}.json").write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
