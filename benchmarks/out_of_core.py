"""Out-of-core gather: random rows of a zarr store far larger than a worker's memory, to zarr.

Generates once (cached in `--dir`) a float32 zarr store of `--gb` GB with narrow rows (`--cols`
columns, chunks of `--chunk-mb` MB, uncompressed, so its size on disk is its size in memory) and
`--rows-out` random row indices (with repeats, unsorted). Then, in one run, each in its own
process (so that each peak RSS is its own, read from `os.wait4`), with dask limited to
`--threads` threads:

1. `da.from_zarr(store).sum()`: the reference, one full read of the store;
2. lazyfuel: `lf.index_select(lf.from_zarr(store), 0, idx).to_zarr(out)`;
3. dask.array: `da.from_zarr(store)[idx]`, rechunked to regular chunks, `.to_zarr(out)`.

Outputs are written uncompressed, like the source. Each prints its wall time (from opening the
store to the result written), its peak RSS and a check of the result (a sample of rows against
the store). The three run `--rounds` times in turn: the first round may read the store from disk,
later ones mostly from the page cache, so compare within a round. The store stays in `--dir` for
the next run unless `--clean` is given.

    python benchmarks/out_of_core.py                          # 8.5 GB under /tmp
    python benchmarks/out_of_core.py --gb 0.2 --rows-out 4096 --clean   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent


def store_path(args: argparse.Namespace) -> Path:
    return Path(args.dir) / f"source-{args.gb}gb-{args.cols}c-{args.chunk_mb}mb.zarr"


def generate(args: argparse.Namespace) -> tuple[Path, Path]:
    """The store and the index file, made once (a `complete` marker says the store is whole)."""
    import zarr

    path = store_path(args)
    idx_path = path.with_suffix(f".idx{args.rows_out}.npy")
    rows = int(args.gb * 1e9) // (4 * args.cols)
    chunk_rows = max(1, args.chunk_mb * 2**20 // (4 * args.cols))
    if not (path / "complete").exists():
        if path.exists():
            shutil.rmtree(path)
        print(f"writing {path}: {rows} x {args.cols} float32 in chunks of {chunk_rows} rows", flush=True)
        start = time.perf_counter()
        arr = zarr.create_array(store=str(path), shape=(rows, args.cols), chunks=(chunk_rows, args.cols),
                                dtype="float32", compressors=None, overwrite=True)
        rng = np.random.default_rng(0)
        for lo in range(0, rows, chunk_rows):
            hi = min(lo + chunk_rows, rows)
            arr[lo:hi] = rng.random((hi - lo, args.cols), dtype=np.float32)
        (path / "complete").touch()
        print(f"  written in {time.perf_counter() - start:.1f} s", flush=True)
    if not idx_path.exists():
        np.save(idx_path, np.random.default_rng(1).integers(0, rows, args.rows_out))
    return path, idx_path


def child(kind: str, store: str, idx_path: str, out: str, threads: int) -> dict[str, Any]:
    """One measurement, run in its own process."""
    import dask
    import dask.array as da
    import zarr

    dask.config.set(scheduler="threads", num_workers=threads)
    idx = np.load(idx_path)
    info: dict[str, Any] = {}
    if kind == "lazyfuel":  # imported, and its backends opened, before the clock starts (as dask is)
        start = time.perf_counter()
        sys.path.insert(0, str(HERE.parent))
        import lazyfuel as lf
        from lazyfuel.providers import available_backends

        info["backends"] = [b.name for b in available_backends()]
        info["startup_s"] = time.perf_counter() - start
    start = time.perf_counter()
    if kind == "sum":
        info["sum"] = float(da.from_zarr(store).sum().compute())
    elif kind == "lazyfuel":
        y = lf.index_select(lf.from_zarr(store), 0, idx)
        info["plan"] = [line.strip() for line in lf.explain(y).splitlines() if "program on" in line]
        y.to_zarr(out, overwrite=True, compressors=None)
    else:
        y = da.from_zarr(store)[idx]
        if len(set(y.chunks[0][:-1])) > 1 or y.chunks[0][-1] > y.chunks[0][0]:
            y = y.rechunk({0: max(y.chunks[0])})  # zarr takes regular chunks only
        y.to_zarr(out, overwrite=True, compressors=None)
    info["wall_s"] = time.perf_counter() - start
    if kind != "sum":
        got, source = zarr.open_array(out, mode="r"), zarr.open_array(store, mode="r")
        sample = np.sort(np.random.default_rng(2).integers(0, len(idx), 8))
        want = source.get_orthogonal_selection((idx[sample], slice(None)))
        info["correct"] = bool(np.array_equal(got.get_orthogonal_selection((sample, slice(None))), want))
    return info


def measure(kind: str, store: Path, idx_path: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Run `kind` in a child process; its result, wall time and peak RSS (MB)."""
    out = Path(args.dir) / f"out-{kind}.zarr"
    cmd = [sys.executable, __file__, "--child", kind, "--store", str(store), "--idx", str(idx_path),
           "--out", str(out), "--threads", str(args.threads)]
    env = dict(os.environ, LAZYFUEL_BACKEND=args.backend)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env, text=True)
    text = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{kind} failed (exit {proc.returncode})")
    info = json.loads(text.strip().splitlines()[-1])
    info["process_s"] = time.perf_counter() - start
    info["peak_rss_mb"] = usage.ru_maxrss / 1024  # KiB on Linux
    info["cpu_s"] = (usage.ru_utime, usage.ru_stime)
    shutil.rmtree(out, ignore_errors=True)
    return info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default="/tmp/lazyfuel-out-of-core")
    parser.add_argument("--gb", type=float, default=8.5)
    parser.add_argument("--cols", type=int, default=256)
    parser.add_argument("--chunk-mb", type=int, default=64)
    parser.add_argument("--rows-out", type=int, default=262144)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--backend", default="auto", help="LAZYFUEL_BACKEND for lazyfuel")
    parser.add_argument("--skip", default="", help="comma-separated: sum, lazyfuel, dask")
    parser.add_argument("--rounds", type=int, default=2, help="run the three this many times (the "
                        "first round may read from disk, later ones from the page cache)")
    parser.add_argument("--clean", action="store_true", help="delete the store afterwards")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    parser.add_argument("--idx", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.store, args.idx, args.out, args.threads)))
        return
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    store, idx_path = generate(args)
    size = sum(f.stat().st_size for f in store.rglob("*") if f.is_file())
    print(f"# store {size / 1e9:.2f} GB on disk, {args.rows_out} random rows, {args.threads} threads, "
          f"LAZYFUEL_BACKEND={args.backend}; load average {os.getloadavg()[0]:.1f}")
    results: dict[str, dict[str, Any]] = {}
    for round_ in range(1, args.rounds + 1):
        print(f"round {round_}:")
        for kind in ("sum", "lazyfuel", "dask"):
            if kind in args.skip.split(","):
                continue
            results[kind] = info = measure(kind, store, idx_path, args)
            extra = f", correct: {info['correct']}" if "correct" in info else ""
            print(f"  {kind:9s} wall {info['wall_s']:7.2f} s  (process {info['process_s']:.2f} s, user "
                  f"{info['cpu_s'][0]:.1f} s, sys {info['cpu_s'][1]:.1f} s)  peak RSS "
                  f"{info['peak_rss_mb']:5.0f} MB{extra}", flush=True)
            if "startup_s" in info:
                print(f"            import + opening backends {info['backends']}: "
                      f"{info['startup_s']:.2f} s (not in wall)")
            for line in info.get("plan", []):
                print(f"            {line}")
    if "sum" in results and "lazyfuel" in results:  # the last round: the store as cached as it gets
        ratio = results["lazyfuel"]["wall_s"] / results["sum"]["wall_s"]
        print(f"last round: lazyfuel / sum wall time {ratio:.2f} (target <= 1.3); lazyfuel peak RSS "
              f"{results['lazyfuel']['peak_rss_mb']:.0f} MB (target <= 1024)")
    if args.clean:
        shutil.rmtree(store, ignore_errors=True)
        idx_path.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
