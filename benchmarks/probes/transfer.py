"""Host <-> device transfers, per transfer mode, and a chunked host -> GPU -> host pipeline.

Part 1, bandwidth (`--mib` bytes, default 256): for each transfer mode the device can run
(`memtypes.Mode`: direct, staged, import, zero-copy; `--modes` picks; direct is left out on
discrete GPUs unless named: their BAR reads at ~20 MB/s), one batch per transfer through the
executor's own path (`transfer.upload_all` / `transfer.download`, so a CPU copy into staging,
the import of the host pages, the vkCmdCopyBuffer and the fence wait are all inside):
upload (host array -> device buffer), download (device buffer -> fresh host array) and round
trip (both in one command buffer). zero-copy moves nothing by itself (kernels read host memory),
so it has no row here. Beside it: numpy copying the same bytes (np.copyto, one thread), and
torch CUDA where available (pageable `.to("cuda")` / `.cpu()`, and pinned buffers).

Part 2, pipeline: x (N, 1024) float32 of `--gib` GiB (default 4) in `--chunk-mib` row chunks;
y = masked_fill(index_select(x, 0, idx), mask, -1) where idx permutes the rows inside each chunk
(so each output block reads one source chunk: one task, one program, one submit per chunk) and
mask (N, 1) is broadcast along the rows. Through the lazy API on dask's threaded scheduler
(`--threads`), once per transfer mode and end (`--sinks`: `compute()` into a fresh result,
`store` through `da.store` into a numpy array made beforehand, each task copying its block,
`into`: `compute(out=)` a touched array reused by every run, as a streaming loop does; `pinned`:
the same with x and the result in page-locked memory from `lf.empty_pinned`, torch then also
running per chunk from and into pinned tensors),
with lf.profile()'s device time; where the pool has several queues, the
default mode once more with every task on one queue (what the queues bring). Beside it: numpy
(one thread) and torch on the GPU doing upload -> index_select -> masked_fill -> download per
chunk (one thread, pageable memory, as a user writes it). GB/s = bytes of x / wall time; "vs
best Vulkan round trip" divides that by part 1's best round trip over the modes (fresh or
existing destination), "vs the link" by torch's pinned upload + download of the same bytes
(issue 4's acceptance asks >= 0.8 of the measured copy bandwidth on the H200, and >= 1.5x
torch). Results are checked bit for bit against numpy on three chunks.

Rounds alternate the configurations after one warm-up run of each; cells are the median (best).

    python benchmarks/probes/transfer.py                               # 256 MiB transfers, 4 GiB pipeline
    python benchmarks/probes/transfer.py --mib 64 --gib 0.5 --rounds 2 # a quick look
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import dask.array as da
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))  # the repository root
os.environ.setdefault("LAZYFUEL_BACKEND", "vulkan")

import lazyfuel as lf
from lazyfuel.backends.vulkan import get_pool, register
from lazyfuel.backends.vulkan import transfer as xfer
from lazyfuel.backends.vulkan.memory import VulkanAllocator
from lazyfuel.backends.vulkan.memtypes import Mode, choose_mode
from lazyfuel.dtypes import DType

try:
    import torch
except ImportError:  # torch is optional: its columns are left out
    torch = None
CUDA = torch is not None and torch.cuda.is_available()
COLS = 1024


def possible_modes(pool: Any) -> list[Mode]:
    """The transfer modes this device can run."""
    flags, can = pool.allocator._type_flags, pool.allocator.imports is not None
    found = []
    for mode in Mode:
        try:
            choose_mode(flags, can, mode.value)
            found.append(mode)
        except ValueError:
            pass
    return found


@contextmanager
def one_queue(pool: Any) -> Iterator[None]:
    """Every recording context submits to the pool's first queue (as before queues.py)."""
    saved = {id(c): c.queue_slot for c in pool._all_contexts}
    next_slot = pool.queues.next_slot
    pool.queues.next_slot = lambda: 0
    for c in pool._all_contexts:
        c.queue_slot = 0
    try:
        yield
    finally:
        pool.queues.next_slot = next_slot
        for c in pool._all_contexts:
            c.queue_slot = saved[id(c)] if id(c) in saved else next_slot()


def rounds(runs: dict[str, Callable[[], float]], n: int) -> dict[str, list[float]]:
    """Each run once to warm up, then `n` rounds of each in turn; the seconds each returned."""
    for run in runs.values():
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(n):
        for name, run in runs.items():
            times[name].append(run())
    return times


def timed(fn: Callable[[], Any]) -> Callable[[], float]:
    def run() -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    return run


def cell(nbytes: float, seconds: list[float]) -> str:
    """`median (best)` GB/s."""
    return f"{nbytes / statistics.median(seconds) / 1e9:.2f} ({nbytes / min(seconds) / 1e9:.2f})"


class ModeRuns:
    """Part 1's three transfers in one mode, on an allocator of its own swapped into the pool."""

    def __init__(self, pool: Any, mode: Mode, host: np.ndarray) -> None:
        self.pool, self.mode, self.host = pool, mode, host
        # room to keep every buffer of a round for reuse: steady state, not allocation, is measured
        self.allocator = VulkanAllocator(pool.device, pool.physical, pool.info, mode=mode,
                                         cache_limit=4 * host.nbytes + (512 << 20))
        self.dev = self.allocator.alloc(host.nbytes)  # resident: what downloads read
        self.dest = np.zeros_like(host)  # an existing, touched array: downloads without page faults
        with self.active(), pool.batch() as batch:
            batch.upload(self.dev, host)
            batch.run()

    @contextmanager
    def active(self) -> Iterator[None]:
        saved, self.pool.allocator = self.pool.allocator, self.allocator
        try:
            yield
        finally:
            self.pool.allocator = saved

    def upload(self) -> float:
        with self.active(), self.pool.batch() as batch:
            start = time.perf_counter()
            xfer.upload_all(batch, [self.host], [DType.U8])
            batch.run()
            return time.perf_counter() - start

    def download(self) -> float:
        with self.active(), self.pool.batch() as batch:
            start = time.perf_counter()
            xfer.download(batch, self.dev, np.empty_like(self.host))  # a fresh array, as the executor's
            batch.run()
            return time.perf_counter() - start

    def download_existing(self) -> float:
        with self.active(), self.pool.batch() as batch:
            start = time.perf_counter()
            xfer.download(batch, self.dev, self.dest)  # compute(out=) with a reused array
            batch.run()
            return time.perf_counter() - start

    def round_trip(self, existing: bool = False) -> float:
        with self.active(), self.pool.batch() as batch:
            start = time.perf_counter()
            (value,) = xfer.upload_all(batch, [self.host], [DType.U8])
            xfer.download(batch, value.allocation, self.dest if existing else np.empty_like(self.host))
            batch.run()
            return time.perf_counter() - start

    def round_trip_existing(self) -> float:
        return self.round_trip(existing=True)

    def close(self) -> None:
        self.allocator.free(self.dev)
        self.allocator.destroy()


def bandwidth(pool: Any, modes: list[Mode], nbytes: int, n_rounds: int) -> dict[str, float]:
    """Part 1: prints the table; returns the best round trip GB/s per mode."""
    host = np.random.default_rng(1).integers(0, 256, nbytes, dtype=np.uint8)
    out = np.empty_like(host)
    per_mode = [ModeRuns(pool, mode, host) for mode in modes if mode is not Mode.ZERO_COPY]
    runs: dict[str, Callable[[], float]] = {}
    for m in per_mode:
        runs.update({f"{m.mode.value} upload": m.upload, f"{m.mode.value} download": m.download,
                     f"{m.mode.value} download (existing array)": m.download_existing,
                     f"{m.mode.value} round trip": m.round_trip,
                     f"{m.mode.value} round trip (existing array)": m.round_trip_existing})
    runs["numpy copy (into a fresh array)"] = timed(host.copy)
    runs["numpy copy (np.copyto, existing array)"] = timed(lambda: np.copyto(out, host))
    if CUDA:
        runs.update(torch_bandwidth(host))
    try:
        times = rounds(runs, n_rounds)
    finally:
        for m in per_mode:
            m.close()
    print(f"\n### bandwidth, {nbytes >> 20} MiB: GB/s, median (best) of {n_rounds}\n")
    print("| transfer | GB/s |\n|---|---|")
    for name, seconds in times.items():
        print(f"| {name} | {cell(nbytes, seconds)} |")
    trips = {}
    for m in per_mode:
        for kind in ("round trip", "round trip (existing array)"):
            trips[f"{m.mode.value} {kind}"] = nbytes / min(times[f"{m.mode.value} {kind}"]) / 1e9
    if CUDA:  # the link itself: pinned buffers one way, then the other
        up, down = (min(times[f"torch {way} (pinned)"]) for way in ("upload", "download"))
        trips["torch pinned round trip (link)"] = nbytes / (up + down) / 1e9
    return trips


def torch_bandwidth(host: np.ndarray) -> dict[str, Callable[[], float]]:
    """torch CUDA copies of the same bytes: pageable and pinned, each way."""
    src = torch.from_numpy(host)
    pinned = torch.empty(src.shape, dtype=torch.uint8, pin_memory=True)
    pinned.copy_(src)
    gpu = src.to("cuda")

    def sync(fn: Callable[[], Any]) -> Callable[[], float]:
        def run() -> float:
            torch.cuda.synchronize()
            start = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            return time.perf_counter() - start
        return run

    return {"torch upload (pageable)": sync(lambda: src.to("cuda")),
            "torch download (pageable)": sync(lambda: gpu.cpu()),
            "torch upload (pinned)": sync(lambda: gpu.copy_(pinned, non_blocking=True)),
            "torch download (pinned)": sync(lambda: pinned.copy_(gpu, non_blocking=True))}


def make_input(gib: float, chunk_rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x (N, COLS) f32 of about `gib` GiB in whole chunks (each chunk's column 0 holds its number,
    so chunks differ), row indices permuting each chunk's rows, a (N, 1) mask."""
    rng = np.random.default_rng(7)
    n_chunks = max(1, round(gib * 2**30 / (chunk_rows * COLS * 4)))
    x = np.empty((n_chunks * chunk_rows, COLS), np.float32)
    base = rng.standard_normal((chunk_rows, COLS), dtype=np.float32)
    for c in range(n_chunks):
        block = x[c * chunk_rows:(c + 1) * chunk_rows]
        block[:] = base
        block[:, 0] = c
    idx = np.concatenate([c * chunk_rows + rng.permutation(chunk_rows) for c in range(n_chunks)])
    return x, idx.astype(np.uint32), rng.random((x.shape[0], 1)) < 0.5


def check(got: np.ndarray, x: np.ndarray, idx: np.ndarray, mask: np.ndarray, chunk_rows: int,
          who: str) -> None:
    """Bit-equality with numpy on the first, a middle and the last chunk."""
    n_chunks = x.shape[0] // chunk_rows
    for c in sorted({0, n_chunks // 2, n_chunks - 1}):
        rows = slice(c * chunk_rows, (c + 1) * chunk_rows)
        expected = np.where(mask[rows], np.float32(-1), x[idx[rows]])
        if got.shape != x.shape or got[rows].tobytes() != expected.tobytes():
            raise SystemExit(f"{who}: chunk {c} differs from numpy")


def lazy_pipeline(x: np.ndarray, idx: np.ndarray, mask: np.ndarray, chunk_rows: int, threads: int,
                  sink: str) -> np.ndarray:
    """The lazy API on dask's threaded scheduler: `compute()` (dask joins the blocks into one
    array at the end, in one thread), or `store` (each task copies its block into a numpy array
    made beforehand, in parallel: `da.store(y.to_dask(), out, lock=False)`)."""
    y = lf.masked_fill(lf.index_select(lf.from_array(x, chunks=(chunk_rows, COLS)), 0, idx), mask, -1.0)
    if sink == "compute":
        return y.compute(scheduler="threads", num_workers=threads)
    if sink == "into":
        return y.compute(out=_reused(y.shape, y.dtype), scheduler="threads", num_workers=threads)
    if sink == "pinned":  # x is page-locked (lf.empty_pinned) and so is the reused result
        return y.compute(out=_reused(y.shape, y.dtype, pinned=True), scheduler="threads", num_workers=threads)
    out = np.empty(y.shape, y.dtype)
    da.store(y.to_dask(), out, lock=False, scheduler="threads", num_workers=threads)
    return out


_KEPT: dict[Mode, VulkanAllocator] = {}  # one allocator per mode for all of part 2's runs


@contextmanager
def kept_mode(pool: Any, mode: Mode) -> Iterator[None]:
    """The pool runs on this mode's allocator, made on first use and kept between runs (as a
    process's pool keeps its own: its device memory and staging live across computes)."""
    if mode not in _KEPT:
        _KEPT[mode] = VulkanAllocator(pool.device, pool.physical, pool.info, mode=mode)
    saved, pool.allocator = pool.allocator, _KEPT[mode]
    try:
        yield
    finally:
        pool.allocator = saved


_REUSED: dict[tuple[Any, ...], np.ndarray] = {}


def _reused(shape: tuple[int, ...], dtype: np.dtype, pinned: bool = False) -> np.ndarray:
    """One touched result array per shape (page-locked with `pinned`), reused by every run
    (`compute(out=)`, as a streaming loop writes each batch into the same buffer)."""
    key = (shape, np.dtype(dtype), pinned)
    if key not in _REUSED:
        _REUSED[key] = lf.empty_pinned(shape, dtype) if pinned else np.empty(shape, dtype)
        _REUSED[key][...] = 0
    return _REUSED[key]


def pinned_copy(x: np.ndarray) -> np.ndarray:
    """`x` copied into page-locked memory (lf.empty_pinned), once, before any clock starts."""
    out = lf.empty_pinned(x.shape, x.dtype)
    np.copyto(out, x)
    return out


def torch_pipeline(x: np.ndarray, idx: np.ndarray, mask: np.ndarray, chunk_rows: int,
                   pinned: tuple[Any, Any] | None = None) -> np.ndarray:
    """torch, one chunk after another: upload, index_select, masked_fill, download; with `pinned`
    (x and the result as page-locked torch tensors) the copies are asynchronous on one stream."""
    out = np.empty_like(x) if pinned is None else pinned[1].numpy()
    for c in range(x.shape[0] // chunk_rows):
        rows = slice(c * chunk_rows, (c + 1) * chunk_rows)
        local = torch.from_numpy((idx[rows] - c * chunk_rows).astype(np.int64)).to("cuda")
        m = torch.from_numpy(mask[rows]).to("cuda")
        if pinned is None:
            g = torch.from_numpy(x[rows]).to("cuda")
            torch.from_numpy(out[rows]).copy_(g.index_select(0, local).masked_fill(m, -1.0))
        else:
            g = pinned[0][rows].to("cuda", non_blocking=True)
            pinned[1][rows].copy_(g.index_select(0, local).masked_fill(m, -1.0), non_blocking=True)
    torch.cuda.synchronize()
    return out


def pipeline(pool: Any, modes: list[Mode], args: argparse.Namespace, round_trip: dict[str, float]) -> None:
    """Part 2: prints the table."""
    chunk_rows = max(1, (args.chunk_mib << 20) // (COLS * 4))
    x, idx, mask = make_input(args.gib, chunk_rows)
    x_pinned = pinned_copy(x) if "pinned" in args.sinks.split(",") else None
    device_seconds: dict[str, list[float]] = {}
    runs: dict[str, Callable[[], float]] = {}

    def lazy(mode: Mode, sink: str, queues: str = "", fresh: bool = False) -> Callable[[], float]:
        name = f"lazyfuel {mode.value} {sink}{queues}{' (a new allocator each run)' if fresh else ''}"

        def run() -> float:
            allocator = xfer.in_mode(pool, mode) if fresh else kept_mode(pool, mode)
            with allocator, lf.profile() as p, one_queue(pool) if queues else nullcontext():
                start = time.perf_counter()
                source = x_pinned if sink == "pinned" else x
                got = lazy_pipeline(source, idx, mask, chunk_rows, args.threads, sink)
                seconds = time.perf_counter() - start
            if name not in device_seconds:
                check(got, x, idx, mask, chunk_rows, name)
                device_seconds[name] = []
            device_seconds[name].append(p.device_seconds)
            return seconds
        return run

    for mode in modes:
        for sink in args.sinks.split(","):
            runs[f"lazyfuel {mode.value} {sink}"] = lazy(mode, sink)
    default, sink = pool.allocator.mode, args.sinks.split(",")[0]
    if len(pool.queues) > 1 and default in modes:  # what several queues bring
        runs[f"lazyfuel {default.value} {sink} (1 queue)"] = lazy(default, sink, " (1 queue)")
    if args.fresh_allocator:  # what a cold allocator costs (how this script measured before)
        for mode in modes:
            runs[f"lazyfuel {mode.value} {sink} (a new allocator each run)"] = lazy(mode, sink, fresh=True)
    runs["numpy (one thread)"] = timed(lambda: np.where(mask, np.float32(-1), x[idx]))
    if CUDA:
        checked = []

        def torch_run() -> float:
            start = time.perf_counter()
            got = torch_pipeline(x, idx, mask, chunk_rows)
            seconds = time.perf_counter() - start
            if not checked:
                check(got, x, idx, mask, chunk_rows, "torch")
                checked.append(True)
            return seconds
        runs["torch per chunk"] = torch_run
        if x_pinned is not None:
            tensors = (torch.from_numpy(x).pin_memory(),
                       torch.empty(x.shape, dtype=torch.float32).pin_memory())

            def torch_pinned_run() -> float:
                start = time.perf_counter()
                got = torch_pipeline(x, idx, mask, chunk_rows, tensors)
                seconds = time.perf_counter() - start
                check(got, x, idx, mask, chunk_rows, "torch pinned")
                return seconds
            runs["torch per chunk, pinned"] = torch_pinned_run
    try:
        times = rounds(runs, args.rounds)
    finally:
        while _KEPT:
            _KEPT.popitem()[1].destroy()
    n_chunks = x.shape[0] // chunk_rows
    print(f"\n### pipeline: {x.nbytes / 2**30:.2f} GiB f32 ({x.shape[0]}, {COLS}) in {n_chunks} chunks of "
          f"{chunk_rows} rows, index_select (rows permuted within chunks) + masked_fill, lazy API with "
          f"{args.threads} threads; median (best) of {args.rounds}; GB/s = bytes of x / wall\n")
    vulkan_trips = {k: v for k, v in round_trip.items() if not k.startswith("torch")}
    best_mode, trip = max(vulkan_trips.items(), key=lambda item: item[1], default=("-", 0.0))
    link = round_trip.get("torch pinned round trip (link)", 0.0)
    print(f"| configuration | wall s | GB/s | vs best Vulkan round trip ({best_mode}, {trip:.2f} GB/s) "
          f"| vs the link's round trip (torch pinned, {link:.2f} GB/s) | device s (sum over tasks) |\n"
          "|---|---|---|---|---|---|")
    for name, seconds in times.items():
        rate = x.nbytes / min(seconds) / 1e9
        ratio = f"{rate / trip:.2f}" if trip else "-"
        vs_link = f"{rate / link:.2f}" if link else "-"
        dev = f"{statistics.median(device_seconds[name]):.2f}" if name in device_seconds else "-"
        print(f"| {name} | {statistics.median(seconds):.2f} ({min(seconds):.2f}) | {cell(x.nbytes, seconds)} "
              f"| {ratio} | {vs_link} | {dev} |")
    if CUDA and modes:
        best = min(min(t) for name, t in times.items() if name.startswith("lazyfuel"))
        ratio = min(times["torch per chunk"]) / best
        print(f"\nbest lazyfuel mode vs torch per chunk (best runs): {ratio:.2f}x")
        if "torch per chunk, pinned" in times:
            ratio = min(times["torch per chunk, pinned"]) / best
            print(f"best lazyfuel mode vs torch per chunk with pinned memory (best runs): {ratio:.2f}x")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256, help="bytes per transfer in part 1 (0: skip it)")
    parser.add_argument("--gib", type=float, default=4.0, help="size of x in part 2 (0: skip part 2)")
    parser.add_argument("--chunk-mib", type=int, default=64, help="chunk size in part 2")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sinks", default="compute,store,into",
                        help="part 2's ends: compute(), store into a fresh array, compute(out=) a reused one "
                        "(into), the same with page-locked x and result (pinned)")
    parser.add_argument("--fresh-allocator", action="store_true",
                        help="also run each mode's first sink on a new allocator every run")
    parser.add_argument("--modes", default="", help="comma-separated transfer modes (default: all the "
                        "device runs, but direct on a discrete GPU, whose BAR the CPU reads at ~20 MB/s)")
    args = parser.parse_args(argv)
    register()
    pool = get_pool()
    modes = possible_modes(pool)
    if args.modes:
        modes = [m for m in modes if m.value in {Mode.parse(t).value for t in args.modes.split(",")}]
    elif pool.info.kind == "discrete":
        modes = [m for m in modes if m is not Mode.DIRECT]
    print(f"device: {pool.label} ({pool.info.kind}; driver {pool.info.driver} {pool.info.driver_info}); "
          f"default mode {pool.allocator.mode.value}; queues {len(pool.queues)}; numpy {np.__version__}"
          f"{'; torch ' + torch.__version__ if torch is not None else ''}{' (CUDA)' if CUDA else ''}; "
          f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
    round_trip = bandwidth(pool, modes, args.mib << 20, args.rounds) if args.mib > 0 else {}
    if args.gib > 0:
        pipeline(pool, modes, args, round_trip)
    return 0


if __name__ == "__main__":
    sys.exit(main())
