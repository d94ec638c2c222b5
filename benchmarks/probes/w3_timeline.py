"""W3's wall time as a timeline: where each thread spends one `persist(device=True)`.

Decided: whether W3's wall (issue 18: 16 GiB resident f32 in 1 GiB blocks, index_select +
masked_fill with an (N, 1) mask, the result kept on the device), ~3x its summed kernel time on
the H200, goes to the main thread before the scheduler runs (lowering, dask graph), the
scheduler, the task bodies before their submit (planning, binding, recording), the waits on the
fences (the device), or after the last task. One persist is timed with wrappers around
`graph.resident.on_device` (lowering), `dask.threaded.get` (the scheduler), `graph.batched.run_blocks`
(a task of several blocks), `VulkanExecutor._record` (recording one program), `Batch.start`
(submit) and `Batch.finish` (the fence wait), and `Replay.run` where the tree replays a held run
(`graph/replay.py`), each event stamped with `time.perf_counter()` and
its thread; printed as ms from the persist's start, per thread, with the device seconds (submit to
fence) of each batch. Where CUDA shares the GPU, x is made by torch and taken device to device, as
data_path.py's W3 does; elsewhere (lavapipe) a host array is persisted.

    python benchmarks/probes/w3_timeline.py [--mib 16384] [--chunk-mib 1024] [--row-bytes 1024,64]
        [--rounds 5] [--warm-s 1.5] [--resident-mask]
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
os.environ.setdefault("LAZYFUEL_BACKEND", "vulkan")

import dask

import lazyfuel as lf

try:
    import torch
except ImportError:  # torch is optional
    torch = None
CUDA = torch is not None and torch.cuda.is_available()

EVENTS: list[tuple[float, str, str]] = []  # (perf_counter, thread name, what)
RECORDING = [False]


def _stamp(what: str) -> None:
    if RECORDING[0]:
        EVENTS.append((time.perf_counter(), threading.current_thread().name, what))


def _wrap(owner: Any, name: str, label: str, after: Callable[[Any, tuple], str] | None = None) -> None:
    """Stamp `label` before and after every call of `owner.name`."""
    real = getattr(owner, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        _stamp(f"{label} <")
        try:
            return real(*args, **kwargs)
        finally:
            _stamp(f"{label} >" + (f" {after(args[0], args)}" if after else ""))

    setattr(owner, name, wrapped)


def recorded(label: str, call: Callable[[], Any]) -> tuple[float, float, Any]:
    """`call()` with its events recorded (EVENTS cleared first, `label <` and `label >` around
    it): (its start on perf_counter, its wall seconds, what it returned)."""
    EVENTS.clear()
    RECORDING[0] = True
    start = time.perf_counter()
    _stamp(f"{label} <")
    result = call()
    _stamp(f"{label} >")
    wall = time.perf_counter() - start
    RECORDING[0] = False
    return start, wall, result


def instrument() -> None:
    from lazyfuel import array
    from lazyfuel.backends.vulkan import batch, executor
    from lazyfuel.graph import batched, resident

    _wrap(resident, "on_device", "lower")
    _wrap(array, "on_device", "lower")  # array.py imports the name
    _wrap(dask.threaded, "get", "scheduler")
    _wrap(batched, "run_blocks", "task")
    try:  # a tree that runs a repeated device persist without dask's machinery (graph/held_run.py)
        from lazyfuel.graph import held_run
    except ImportError:
        held_run = None
    if held_run is not None:
        _wrap(held_run.HeldRun, "run", "held run")
    try:  # a tree that replays a held run's last decisions (graph/replay.py)
        from lazyfuel.graph import replay
    except ImportError:
        replay = None
    if replay is not None:
        _wrap(replay.Replay, "run", "replay")
    _wrap(executor.VulkanExecutor, "_record", "record")
    _wrap(executor.VulkanExecutor, "_run_many", "programs")  # run_resident_many: the batches of a pool
    _wrap(batch.Batch, "start", "submit")
    _wrap(batch.Batch, "finish", "wait", lambda b, _: f"device {b.device_seconds * 1e3:.2f} ms")
    _wrap(batch.Batch, "close", "close")  # a batch's memory and context back (after its fence)
    if replay is not None and hasattr(replay.Replay, "_replayed"):
        _wrap(replay.Replay, "_replayed", "replayed")  # one pool's programs, then each result viewed


def resident_x(rows: int, cols: int, chunk_rows: int) -> Any:
    if CUDA:
        xt = torch.rand((rows, cols), device="cuda", dtype=torch.float32)
        torch.cuda.synchronize()
        return lf.from_array(xt, chunks=(chunk_rows, cols)), xt
    xh = np.random.default_rng(3).standard_normal((rows, cols)).astype(np.float32)
    return lf.from_array(xh, chunks=(chunk_rows, cols)).persist(device=True), None


def one_width(mib: int, chunk_mib: int, row_bytes: int, rounds: int, warm_s: float,
              resident_mask: bool) -> None:
    cols = row_bytes // 4
    rows = (mib << 20) // row_bytes
    chunk_rows = (chunk_mib << 20) // row_bytes
    x, xt = resident_x(rows, cols, chunk_rows)
    rng = np.random.default_rng(row_bytes)
    idx = np.concatenate([rng.permutation(min(chunk_rows, rows - lo)) + lo
                          for lo in range(0, rows, chunk_rows)])
    mask = rng.random((rows, 1)) < 0.5
    if resident_mask:
        m = torch.from_numpy(mask).cuda() if CUDA else mask
        mask_arg = lf.from_array(m, chunks=(chunk_rows, 1))
        mask_arg = mask_arg if CUDA else mask_arg.persist(device=True)
    else:
        mask_arg = mask
    y = x.index_select(0, idx).masked_fill(mask_arg, -1.0)
    end = time.perf_counter() + warm_s
    while time.perf_counter() < end:
        kept = y.persist(device=True)
        del kept
    walls = []
    for r in range(rounds):
        start, wall, kept = recorded("persist", functools.partial(y.persist, device=True))
        del kept
        walls.append(wall)
        print(f"\n{row_bytes} B rows, {mib} MiB in blocks of {chunk_mib} MiB"
              f"{', mask resident' if resident_mask else ''}, round {r}: {wall * 1e3:.2f} ms")
        if r == rounds - 1 or wall == min(walls):
            _print_timeline(start)
    each = " ".join(f"{w * 1e3:.1f}" for w in walls)
    print(f"{row_bytes} B rows: best {min(walls) * 1e3:.2f} ms, rounds {each}")
    del x, xt, y
    if CUDA:
        torch.cuda.empty_cache()


def _print_timeline(start: float) -> None:
    threads: dict[str, list[str]] = {}
    for at, thread, what in EVENTS:
        threads.setdefault(thread, []).append(f"{(at - start) * 1e3:7.2f} {what}")
    for thread, lines in threads.items():
        print(f"  [{thread}]")
        compact: list[str] = []
        for line in lines:
            if "record" in line:  # one line per program is too many: first and last of a run
                if len(compact) > 1 and "record" in compact[-1] and "record" in compact[-2]:
                    compact[-1] = line
                    continue
            compact.append(line)
        for line in compact:
            print("    " + line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=16384 if CUDA else 64)
    ap.add_argument("--chunk-mib", type=int, default=1024 if CUDA else 4)
    ap.add_argument("--row-bytes", default="1024,64")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warm-s", type=float, default=1.5)
    ap.add_argument("--resident-mask", action="store_true")
    args = ap.parse_args()
    instrument()
    for row_bytes in (int(b) for b in args.row_bytes.split(",")):
        one_width(args.mib, args.chunk_mib, row_bytes, args.rounds, args.warm_s, args.resident_mask)


if __name__ == "__main__":
    main()
