"""Kernel bandwidth and dispatch overhead on the Vulkan device, next to numpy (and torch / CuPy).

For each kernel and dtype: GB/s on the device (buffers already resident, many repetitions recorded
into one command buffer, timed by wall clock around submit + wait), beside the device's own copy
bandwidth (vkCmdCopyBuffer and a copy shader) and numpy (torch, CuPy when importable) doing the
same selection on the host. Bytes counted: elements read + elements written + index/mask bytes.
Then dispatch overhead: 1000 tiny dispatches submitted one by one vs recorded into one buffer.

    python benchmarks/kernels.py            # 16 MiB buffers
    python benchmarks/kernels.py --quick    # 4 MiB buffers, shorter timings
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import lazyfuel.backends.vulkan.kernels as kmod
from lazyfuel.backends.vulkan import get_pool
from lazyfuel.backends.vulkan.copy_kernels import ContiguizeKernel
from lazyfuel.backends.vulkan.fill_kernels import MaskedFillKernel
from lazyfuel.backends.vulkan.kernels import (
    DeviceValue,
    GatherKernel,
    IndexSelectKernel,
    StatusSlot,
    bind,
)
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.ops.contiguize import PUSH as CONTIGUIZE_PUSH

DTYPES = (DType.F32, DType.F16, DType.BF16, DType.F64, DType.U8, DType.U32)


@dataclass
class BenchStep:
    """What a kernel's `record` reads from a Step."""

    params: dict[str, Any]
    out_shape: tuple[int, ...]

    @property
    def param(self) -> dict[str, Any]:
        return self.params


def optional(name: str) -> Any:
    try:
        return __import__(name)
    except Exception:
        return None


torch = optional("torch")
cupy = optional("cupy")


def best_of(fn: Callable[[], None], seconds: float) -> float:
    """Smallest time of `fn` over repeated calls lasting about `seconds` (after one warm-up)."""
    fn()
    best, spent = math.inf, 0.0
    while spent < seconds or best == math.inf:
        t = time.perf_counter()
        fn()
        dt = time.perf_counter() - t
        best, spent = min(best, dt), spent + dt
    return best


class Device:
    """Resident buffers and timed batches on the pool."""

    def __init__(self, reps: int, seconds: float) -> None:
        self.pool = get_pool()
        self.reps, self.seconds = reps, seconds
        self._held: list[Any] = []

    def put(self, a: np.ndarray) -> DeviceValue:
        alloc = self.pool.allocator.alloc(max(a.nbytes, 1))
        self._held.append(alloc)
        with self.pool.batch() as batch:
            batch.upload(alloc, np.ascontiguousarray(a).reshape(-1).view(np.uint8))
            batch.run()
        return DeviceValue(alloc, DType.from_numpy(a.dtype), Layout.of(a))

    def empty(self, nbytes: int) -> Any:
        alloc = self.pool.allocator.alloc(max(nbytes, 1))
        self._held.append(alloc)
        return alloc

    def time(self, record: Callable[[Any], None]) -> float:
        """Seconds per repetition of `record(batch)` on the device."""
        def once() -> None:
            with self.pool.batch() as batch:
                for _ in range(self.reps):
                    record(batch)
                    batch.barrier()
                batch.run()
        return best_of(once, self.seconds) / self.reps

    def free(self) -> None:
        for alloc in self._held:
            self.pool.allocator.free(alloc)
        self._held.clear()
        self.pool.allocator.trim()


def gbs(nbytes: float, seconds: float) -> float:
    return nbytes / seconds / 1e9 if seconds > 0 else float("nan")


def copy_shader(batch: Any, src: Any, dst: Any, nbytes: int) -> None:
    """Record contiguize's module at rank 1 (16-byte words) copying `nbytes` (a multiple of 16),
    with the pool's workgroup choice; storage buffers only where the range fits the device."""
    words = nbytes // 16
    ssbo = kmod.storage_buffers(batch, nbytes)
    spec = kmod.spec_constants(batch, "contiguize", words >= kmod.I31_LIMIT, 1)
    pipe = batch.pool.pipelines.get(f"contiguize_w16{'_ssbo' if ssbo else ''}", spec)
    vals = CONTIGUIZE_PUSH.values(src=src.address, dst=dst.address, base=0, n=words, shape=(words, *[1] * 7),
                                  strides=(1, *[0] * 7))
    out = bind(dst, nbytes)
    buffers = (bind(src, nbytes), out, out, out) if ssbo else None
    kmod.dispatch(batch, pipe, CONTIGUIZE_PUSH, vals, words, kmod.per_group(batch, "contiguize"), buffers)


def rows(dev: Device, dtype: DType, nbytes: int, rng: np.random.Generator) -> list[tuple[str, float, dict]]:
    """(kernel, device GB/s, {host library: GB/s}) for one dtype."""
    w = dtype.itemsize
    n = nbytes // w
    x = rng.integers(0, 256, n * w, dtype=np.uint8).view(dtype.numpy)
    raw = x.view(f"u{w}")
    xd = dev.put(x)
    out = dev.empty(n * w)
    status = dev.empty(16)
    slot = StatusSlot(status, 0)
    results = []

    def host(fns: dict[str, Callable[[], Any]], moved: float) -> dict[str, float]:
        return {k: gbs(moved, best_of(f, dev.seconds)) for k, f in fns.items() if f is not None}

    # device copy bandwidth
    moved = 2 * n * w
    t = dev.time(lambda b: b.copy(xd.allocation, 0, out, 0, n * w))
    results.append(("vkCmdCopyBuffer", gbs(moved, t), host({"numpy": lambda: raw.copy()}, moved)))
    t = dev.time(lambda b: copy_shader(b, xd.allocation, out, n * w))
    results.append(("copy shader", gbs(moved, t), {}))

    # contiguize: a transpose and a reversal
    side = math.isqrt(n)
    sq = x[: side * side].reshape(side, side)
    step = BenchStep({"shape": (side, side), "strides": (1, side), "offset": 0}, (side, side))
    t = dev.time(lambda b: ContiguizeKernel().record(b, step, [xd], out, None))
    ts = torch.from_numpy(sq.view(f"i{w}") if w > 1 else sq.view(np.uint8)) if torch else None
    results.append(("contiguize x.T", gbs(2 * side * side * w, t),
                    host({"numpy": lambda: np.ascontiguousarray(sq.T),
                          "torch": (ts is not None and (lambda: ts.T.contiguous())) or None},
                         2 * side * side * w)))
    step = BenchStep({"shape": (n,), "strides": (-1,), "offset": n - 1}, (n,))
    t = dev.time(lambda b: ContiguizeKernel().record(b, step, [xd], out, None))
    results.append(("contiguize x[::-1]", gbs(moved, t), host({"numpy": lambda: raw[::-1].copy()}, moved)))

    # index_select: rows of 256 elements along dim 0, and single elements along the last dim
    inner = 256
    outer_rows = n // inner
    idx = rng.integers(0, outer_rows, outer_rows).astype(np.uint32)
    idx_d = dev.put(idx)
    step = BenchStep({"outer_count": 1, "source_dim_size": outer_rows, "n_indices": outer_rows,
                      "inner_count": inner}, (outer_rows, inner))
    t = dev.time(lambda b: IndexSelectKernel().record(b, step, [xd, idx_d], out, slot))
    m2 = raw[: outer_rows * inner].reshape(outer_rows, inner)
    moved_rows = 2 * outer_rows * inner * w + 4 * outer_rows
    results.append(("index_select rows", gbs(moved_rows, t),
                    host({"numpy": lambda: np.take(m2, idx, axis=0)}, moved_rows)))
    idx_e = rng.integers(0, n, n).astype(np.uint32)
    idx_ed = dev.put(idx_e)
    step = BenchStep({"outer_count": 1, "source_dim_size": n, "n_indices": n, "inner_count": 1}, (n,))
    t = dev.time(lambda b: IndexSelectKernel().record(b, step, [xd, idx_ed], out, slot))
    moved_el = 2 * n * w + 4 * n
    results.append(("index_select elements", gbs(moved_el, t),
                    host({"numpy": lambda: np.take(raw, idx_e)}, moved_el)))

    # gather along the last dim of [n/256, 256]
    g_idx = rng.integers(0, inner, (outer_rows, inner)).astype(np.uint32)
    g_idx_d = dev.put(g_idx)
    step = BenchStep({"source_shape": (outer_rows, inner), "output_shape": (outer_rows, inner), "dim": 1},
                     (outer_rows, inner))
    t = dev.time(lambda b: GatherKernel().record(b, step, [xd, g_idx_d], out, slot))
    g_idx_p = g_idx.astype(np.intp)
    results.append(("gather dim -1", gbs(moved_rows + 4 * outer_rows * inner - 4 * outer_rows, t),
                    host({"numpy": lambda: np.take_along_axis(m2, g_idx_p, axis=1)},
                         moved_rows + 4 * outer_rows * inner - 4 * outer_rows)))

    # masked_fill
    mask = rng.integers(0, 2, n).astype(bool)
    mask_d = dev.put(mask)
    fill = bytes(w)
    step = BenchStep({"fill_bytes": fill}, (n,))
    t = dev.time(lambda b: MaskedFillKernel().record(b, step, [xd, mask_d], out, None))
    moved_mf = 2 * n * w + n
    zero = raw.dtype.type(0)
    results.append(("masked_fill", gbs(moved_mf, t),
                    host({"numpy": lambda: np.where(mask, zero, raw)}, moved_mf)))
    return results


def dispatch_overhead(dev: Device, count: int) -> tuple[float, float, float, float]:
    """Seconds per tiny dispatch: one submit each; all in one command buffer; recording only
    (kernel checks + hot path); the hot path alone (`Recorder.dispatch` on pre-packed values)."""
    x = dev.put(np.zeros(64, np.float32))
    mask = dev.put(np.zeros(64, bool))
    out = dev.empty(256)
    step = BenchStep({"fill_bytes": bytes(4)}, (64,))
    kernel = MaskedFillKernel()
    pool = dev.pool

    def separate() -> None:
        for _ in range(count):
            with pool.batch() as batch:
                kernel.record(batch, step, [x, mask], out, None)
                batch.run()

    def batched() -> None:
        with pool.batch() as batch:
            for _ in range(count):
                kernel.record(batch, step, [x, mask], out, None)
                batch.barrier()
            batch.run()

    def record_only() -> None:
        with pool.batch() as batch:
            for _ in range(count):
                kernel.record(batch, step, [x, mask], out, None)
                batch.barrier()
            # closed without running: the context's command pool is reset on its next use

    local, elems = pool.groups["masked_fill"]
    pipe = pool.pipelines.get("masked_fill_w4_ssbo" if pool.ssbo else "masked_fill_w4",
                              (local, elems, 0, 1, int(pool.coalesced)))
    dst = bind(out, 256)
    buffers = (bind(x.allocation, 256), dst, bind(mask.allocation, 64), dst) if pool.ssbo else None
    values = (x.allocation.address, out.address, mask.allocation.address, 0, 0, 16, 0, 0, 0, 0)

    def hot_path() -> None:
        with pool.batch() as batch:
            dispatch = batch.recorder.dispatch
            for _ in range(count):
                dispatch(pipe, "<QQQQQQ4I", values, 1, buffers)

    return (best_of(separate, dev.seconds) / count, best_of(batched, dev.seconds) / count,
            best_of(record_only, dev.seconds) / count, best_of(hot_path, dev.seconds) / count)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Vulkan kernel bandwidth vs copy and numpy")
    parser.add_argument("--quick", action="store_true", help="4 MiB buffers, short timings")
    parser.add_argument("--mib", type=int, default=None, help="buffer size in MiB (default 16, quick 4)")
    parser.add_argument("--dtypes", default=",".join(d.name for d in DTYPES))
    args = parser.parse_args(argv)
    mib = args.mib or (4 if args.quick else 16)
    dev = Device(reps=2, seconds=0.1 if args.quick else 0.5)
    info = dev.pool.info
    print(f"device: {info.name} ({info.kind}, {info.driver} {info.driver_info}); "
          f"host: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; numpy {np.__version__}"
          f"{'; torch ' + torch.__version__ if torch else ''}{'; cupy ' + cupy.__version__ if cupy else ''}")
    groups = ", ".join(f"{f} {g[0]}x{g[1]}" for f, g in dev.pool.groups.items())
    print(f"buffers: {mib} MiB; workgroup x elements per invocation: {groups}; "
          f"memory: {'storage buffers' if dev.pool.ssbo else 'device addresses'}; "
          f"mapping: {'coalesced' if dev.pool.coalesced else 'sequential'}; "
          "GB/s = bytes read + written / time")
    rng = np.random.default_rng(0)
    libs = ["numpy"] + (["torch"] if torch else [])
    header = (f"{'kernel':<24}{'dtype':<6}{'vulkan GB/s':>12}" + "".join(f"{k + ' GB/s':>14}" for k in libs)
              + f"{'x numpy':>9}")
    print(header)
    print("-" * len(header))
    for name in args.dtypes.split(","):
        dtype = DType.parse(name.strip())
        for kernel, dev_gbs, host in rows(dev, dtype, mib << 20, rng):
            ratio = dev_gbs / host["numpy"] if "numpy" in host else float("nan")
            cells = "".join(f"{host[k]:>14.2f}" if k in host else f"{'':>14}" for k in libs)
            print(f"{kernel:<24}{dtype.name:<6}{dev_gbs:>12.2f}{cells}{ratio:>9.2f}")
        dev.free()
    count = 1000
    separate, batched, record, hot = dispatch_overhead(dev, count)
    print(f"\n{count} tiny dispatches (masked_fill, 64 elements), per dispatch:")
    print(f"  one submit + fence wait each    {separate * 1e6:8.1f} us")
    print(f"  all in one command buffer       {batched * 1e6:8.1f} us")
    print(f"  recording only (kernel.record)  {record * 1e6:8.1f} us")
    print(f"  hot path only (Recorder.dispatch){hot * 1e6:7.1f} us")
    dev.free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
