"""Out-of-core gather, side by side: random rows of a zarr store read by lazyfuel, dask.array's
take, TensorStore and zarr's own `oindex`, each in a fresh process (issue 19, item 5).

Generates (in `--dir`, deleted afterwards unless `--keep`) one float32 zarr v3 store per codec:
`raw` (no compressor), `zstd`, `blosc` (zstd inside blosc, shuffled) and, when asked for,
`sharded` (raw inner chunks of `--inner-mb` inside the chunks). All hold the same values (small
whole numbers, so the compressed stores are smaller than the raw one). For every codec, index count
(`--rows`) and order (`sorted`, `random`: random rows, with repeats, unsorted), each reader runs in
its own process: it opens the store, reads the rows into a numpy array, and reports

- time (opening the store to the numpy result in hand),
- useful bytes/s (bytes of the result / time),
- bytes read from disk/s (`/proc/self/io` read_bytes over the read: 0 when the page cache holds
  the store) and bytes through read calls (`rchar`, cached or not),
- start-up (imports; lazyfuel's registry and backends) apart, not in the time,
- peak RSS of the process (`VmHWM` of /proc/self/status at its end: `wait4`'s maximum would also
  count the pages the child shared with this process between fork and exec),
- whether the result is bit-equal to numpy (rows picked from the raw store's chunk files read
  with `np.fromfile`).

The readers of a case run in an order that changes case by case (`reader_orders`: a balanced
Latin square, so over as many cases as there are readers each reader runs once in every place and
right after every other reader once, none always first on a disk the previous case left, none
always after the zarr reader that frees ~2 GB), the codecs of one (rows, order) taking the
square's orders in turn and the next (rows, order) starting one order on, so each codec's cases
see the orders in turn too; each case's order is printed before its lines (`# order: ...`) and
each result records its place (`place`, from 0).

With `--repeat N` each case's readers run N times, alternating (every reader once, then every
reader again, each in a fresh process with the page cache dropped before it, each round in the
next order of the square): every time is printed as it comes, and each case's ratio line gives
the ratio of the readers' medians, the ratio of their bests, and all the times. Issue 19's
acceptance is judged on the default single run (`--repeat 1`: each reader's one time a case, the
same kind of figure for every reader); the repeats tell a real difference from this VM's noise
(other work on its two CPUs moves one reader's time by 20-40% between runs).

The page cache is dropped before every reader (`echo 1 > /proc/sys/vm/drop_caches`; root only)
unless `--warm`: the first line of the output says which. Readers use their default settings (the
threads of this machine: dask's threaded scheduler, TensorStore's and zarr's own concurrency).

    python benchmarks/out_of_core.py                                     # 2 GB stores, 1k and 262k rows
    python benchmarks/out_of_core.py --gb 0.3 --rows 1000 --codecs raw   # a quick look
    python benchmarks/out_of_core.py --dir D --keep ...   # then --dir D --keep --reuse: written once
"""

from __future__ import annotations

import argparse
import hashlib
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
READERS = ("lazyfuel", "dask", "tensorstore", "zarr")
EXTRA_READERS = ("lazyfuel-to-zarr", "cat", "cat-parallel")  # by name: to zarr; cat of the chunk files
MODULES = {"lazyfuel": "zarr", "lazyfuel-to-zarr": "zarr", "cat": "zarr", "cat-parallel": "zarr",
           "dask": "dask.array"}  # each needs
STARTUP = {"lazyfuel": ("dask.array", "zarr"), "lazyfuel-to-zarr": ("dask.array", "zarr"),
           "dask": ("dask.array", "zarr"), "tensorstore": ("tensorstore",), "zarr": ("zarr",),
           "cat": ("zarr",), "cat-parallel": ("zarr",)}  # imported before the clock (its store's format too)
CAT_STREAMS = 4  # cat-parallel: this many cats at once (the disk's speed with reads in flight)
CODECS = ("raw", "zstd", "blosc", "sharded")
ORDERS = ("sorted", "random")
DROP = Path("/proc/sys/vm/drop_caches")


def codec_args(codec: str, chunks: tuple[int, int], inner_rows: int) -> dict[str, Any]:
    """`zarr.create_array` keywords for one codec case."""
    from zarr.codecs import BloscCodec, ZstdCodec

    if codec == "raw":
        return {"chunks": chunks, "compressors": None}
    if codec == "zstd":
        return {"chunks": chunks, "compressors": ZstdCodec(level=1)}
    if codec == "blosc":
        return {"chunks": chunks, "compressors": BloscCodec(cname="zstd", clevel=1, shuffle="shuffle")}
    if codec == "sharded":
        return {"shards": chunks, "chunks": (inner_rows, chunks[1]), "compressors": None}
    raise SystemExit(f"unknown codec {codec!r}; known: {', '.join(CODECS)}")


def values(lo: int, hi: int, cols: int) -> np.ndarray:
    """Rows lo:hi of the table: small whole numbers (compressible), a function of the row."""
    rng = np.random.default_rng(lo)
    return rng.integers(0, 64, (hi - lo, cols), dtype=np.uint8).astype(np.float32)


def generate(folder: Path, codec: str, rows: int, cols: int, chunk_rows: int, inner_rows: int,
             reuse: bool = False) -> Path:
    """The store of `codec`, written chunk by chunk; with `reuse`, one this function finished
    before with the same shape, chunks and inner chunks is kept as it is (its marker file says
    so: a store cut short by a kill has none)."""
    import zarr

    path = folder / f"{codec}.zarr"
    done = folder / f".{codec}-{rows}x{cols}-{chunk_rows}-{inner_rows}.done"
    if reuse and done.exists() and path.exists():
        print(f"  {codec:8s} store reused ({path})", flush=True)
        return path
    done.unlink(missing_ok=True)
    start = time.perf_counter()
    arr = zarr.create_array(store=str(path), shape=(rows, cols), dtype="float32", zarr_format=3,
                            overwrite=True, **codec_args(codec, (chunk_rows, cols), inner_rows))
    for lo in range(0, rows, chunk_rows):
        arr[lo:lo + chunk_rows] = values(lo, min(lo + chunk_rows, rows), cols)
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    print(f"  {codec:8s} store written in {time.perf_counter() - start:5.1f} s: {size / 1e9:.2f} GB on disk",
          flush=True)
    done.touch()
    return path


def reference(raw: Path, idx: np.ndarray, shape: tuple[int, int], chunk_rows: int) -> str:
    """sha256 of the rows `idx` of the raw store, read with numpy alone (its chunk files)."""
    out = np.empty((idx.size, shape[1]), np.float32)
    chunk_of = idx // chunk_rows
    for c in np.unique(chunk_of):
        data = np.fromfile(raw / "c" / str(c) / "0", dtype="<f4").reshape(chunk_rows, shape[1])
        here = np.flatnonzero(chunk_of == c)
        out[here] = data[idx[here] - c * chunk_rows]
    return hashlib.sha256(out.tobytes()).hexdigest()


def reader_orders(count: int) -> list[list[int]]:
    """Orders of `count` readers (their numbers), one per case in turn: a balanced Latin square
    (Williams' design), in which each reader takes every place once and follows every other reader
    once, over `count` orders (`2 * count` for an odd count, each order also reversed)."""
    if count < 2:
        return [list(range(count))]
    first = [0]
    for step in range(1, count):  # 0, 1, n-1, 2, n-2, ...
        first.append((step + 1) // 2 if step % 2 else count - step // 2)
    square = [[(r + k) % count for r in first] for k in range(count)]
    return square if count % 2 == 0 else square + [row[::-1] for row in square]


def order_of(orders: list[list[int]], codec: int, rounds: int, round_: int, group: int) -> list[int]:
    """The readers' order for round `round_` (of `rounds`) of codec number `codec` in the
    `group`-th (rows, order): the codecs' rounds take `orders` in turn, each group one on, so the
    cases of one codec, group after group, take every order in turn as well."""
    return orders[(codec * rounds + round_ + group) % len(orders)]


def io_counters() -> dict[str, int]:
    """This process's /proc/self/io counters."""
    text = Path("/proc/self/io").read_text()
    return {k: int(v) for k, v in (line.split(": ") for line in text.splitlines())}


def read_rows(reader: str, store: str, idx: np.ndarray) -> np.ndarray:
    """`store`'s rows `idx` as numpy, read by `reader` with its default settings."""
    if reader == "lazyfuel":
        import lazyfuel as lf

        return lf.index_select(lf.from_zarr(store), 0, idx).compute()
    if reader == "dask":
        import dask.array as da

        return da.take(da.from_zarr(store), idx, axis=0).compute()
    if reader == "tensorstore":
        import tensorstore as ts

        arr = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": store}}).result()
        return arr.oindex[idx].read().result()
    if reader == "zarr":
        import zarr

        return zarr.open_array(store, mode="r").oindex[idx]
    if reader == "lazyfuel-to-zarr":  # streamed into an uncompressed store beside the source, read back
        import zarr

        import lazyfuel as lf

        out = f"{store}.out"
        lf.index_select(lf.from_zarr(store), 0, idx).to_zarr(out, overwrite=True, compressors=None)
        got = zarr.open_array(out, mode="r")
        return got  # type: ignore[return-value]  # read back after the clock stops
    if reader in ("cat", "cat-parallel"):  # the touched chunk files (no sharding) into /dev/null
        import zarr

        arr = zarr.open_array(store, mode="r")
        files = [f"{store}/c/{c}/0" for c in np.unique(idx // arr.chunks[0])]
        streams = CAT_STREAMS if reader == "cat-parallel" else 1  # every streams-th file each
        cats = [subprocess.Popen(["cat", *files[i::streams]], stdout=subprocess.DEVNULL)
                for i in range(streams)]
        if any(c.wait() for c in cats):
            raise SystemExit("cat failed")
        return np.empty((0,), np.float32)
    raise SystemExit(f"unknown reader {reader!r}; known: {', '.join(READERS + EXTRA_READERS)}")


def child(named: str, store: str, idx_path: str) -> dict[str, Any]:
    """One measurement, in its own process: start-up first (imports; for lazyfuel its registry
    and backends; timed apart as `startup_s`), then the read. A lazyfuel reader named
    `lazyfuel@CHECKOUT` imports lazyfuel from that checkout (another branch side by side), else
    from this script's."""
    reader, _, checkout = named.partition("@")
    idx = np.load(idx_path)
    start = time.perf_counter()
    if reader.startswith("lazyfuel"):
        sys.path.insert(0, checkout or str(HERE.parent))
        from lazyfuel.api import DefaultRuntime

        DefaultRuntime.current().planner()
    for module in STARTUP[reader]:
        __import__(module)
    if reader in ("lazyfuel", "lazyfuel-to-zarr", "dask"):  # dask imports distributed on first compute
        import importlib.util

        if importlib.util.find_spec("distributed"):
            import distributed  # noqa: F401
    startup = time.perf_counter() - start
    before = io_counters()
    start = time.perf_counter()
    out = read_rows(reader, store, idx)
    wall = time.perf_counter() - start
    after = io_counters()
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    if reader == "lazyfuel-to-zarr":
        out = np.asarray(out[...])
        shutil.rmtree(f"{store}.out")
    return {"wall_s": wall, "startup_s": startup, "peak_rss_mb": int(status["VmHWM"].split()[0]) / 1024,
            "disk_bytes": after["read_bytes"] - before["read_bytes"],
            "read_call_bytes": after["rchar"] - before["rchar"], "out_bytes": out.nbytes,
            "sha256": hashlib.sha256(np.ascontiguousarray(out).tobytes()).hexdigest()}


def available(named: str) -> str | None:
    """None when `named` (a reader, maybe `lazyfuel@CHECKOUT`) can run here, else why not."""
    reader, _, checkout = named.partition("@")
    if checkout and not (reader.startswith("lazyfuel") and Path(checkout, "lazyfuel").is_dir()):
        return f"{named}: only lazyfuel readers take @CHECKOUT, a folder holding lazyfuel/"
    module = MODULES.get(reader, reader)
    try:
        __import__(module)
    except ImportError as err:
        return f"{module} is not installed ({err}); pip install -e .[bench]"
    return None


def drop_caches() -> bool:
    """Drop the page cache (clean pages only); whether that worked."""
    try:
        os.sync()
        DROP.write_text("1\n")
        return True
    except OSError:
        return False


def measure(reader: str, store: Path, idx_path: Path, drop: bool, timeout: float) -> dict[str, Any]:
    """Run `reader` in a child process (killed after `timeout` seconds); its report."""
    if drop:
        drop_caches()
    cmd = [sys.executable, __file__, "--child", reader, "--store", str(store), "--idx", str(idx_path)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        text, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"error": f"still running after {timeout:.0f} s: killed"}
    if proc.returncode:
        return {"error": f"exit {proc.returncode}"}
    return json.loads(text.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default="/tmp/lazyfuel-out-of-core")
    parser.add_argument("--gb", type=float, default=2, help="size of the raw store")
    parser.add_argument("--cols", type=int, default=256)
    parser.add_argument("--chunk-mb", type=float, default=64)
    parser.add_argument("--inner-mb", type=float, default=1, help="inner chunks of the sharded store")
    parser.add_argument("--rows", default="1000,262144", help="comma-separated index counts")
    parser.add_argument("--orders", default=",".join(ORDERS))
    parser.add_argument("--codecs", default=",".join(CODECS), help=f"comma-separated of {', '.join(CODECS)}")
    parser.add_argument("--readers", default=",".join(READERS))
    parser.add_argument("--repeat", type=int, default=1,
                        help="run the readers this many times, alternating (ratios of medians and bests)")
    parser.add_argument("--warm", action="store_true", help="keep the page cache (do not drop it)")
    parser.add_argument("--keep", action="store_true", help="keep the stores in --dir afterwards")
    parser.add_argument("--reuse", action="store_true",
                        help="read the stores an earlier --keep run left in --dir, not written again")
    parser.add_argument("--json", help="also write every result to this file")
    parser.add_argument("--timeout", type=float, default=120, help="seconds one reader may take")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    parser.add_argument("--idx", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.store, args.idx)))
        return
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    cols, row_bytes = args.cols, 4 * args.cols
    chunk_rows = max(1, int(args.chunk_mb * 2**20) // row_bytes)
    rows = max(chunk_rows, int(args.gb * 1e9) // row_bytes // chunk_rows * chunk_rows)
    inner_rows = max(1, int(args.inner_mb * 2**20) // row_bytes)
    readers, skipped = [], []
    for r in args.readers.split(","):
        why = available(r)
        (skipped.append(f"{r}: skipped, {why}") if why else readers.append(r))
    drop = not args.warm and drop_caches()
    cache = ("dropped before every reader" if drop else "kept (warm)" if args.warm
             else "NOT dropped (not root)")
    print(f"# {rows} x {cols} float32 ({rows * row_bytes / 1e9:.2f} GB raw) in chunks of {chunk_rows} rows "
          f"({chunk_rows * row_bytes / 2**20:.0f} MiB); {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}; page cache "
          f"{cache}; readers in a rotating order (a balanced Latin square, case by case)")
    for line in skipped:
        print(f"# {line}")
    results: list[dict[str, Any]] = []
    orders, group = reader_orders(len(readers)), 0  # the readers' order, case by case (and round by round)
    try:
        codecs = args.codecs.split(",")
        stores = {c: generate(folder, c, rows, cols, chunk_rows, inner_rows, args.reuse)
                  for c in dict.fromkeys(["raw", *codecs])}
        print(f"{'codec':8s} {'rows':>7s} {'order':6s} {'reader':11s} {'time s':>7s} {'useful MB/s':>11s} "
              f"{'disk MB/s':>9s} {'disk MB':>8s} {'read MB':>8s} {'peak RSS MB':>11s}  equal")
        for count in (int(n) for n in args.rows.split(",")):
            random = np.random.default_rng(count).integers(0, rows, count)
            for order in args.orders.split(","):
                idx = np.sort(random) if order == "sorted" else random
                idx_path = folder / f"idx-{count}-{order}.npy"
                np.save(idx_path, idx)
                want = reference(stores["raw"], idx, (rows, cols), chunk_rows)
                for c, codec in enumerate(codecs):
                    base = {"codec": codec, "rows": count, "order": order}
                    for r in range(args.repeat):
                        ranks = order_of(orders, c, args.repeat, r, group)
                        print(f"# order: {', '.join(readers[r] for r in ranks)}", flush=True)
                        for place, reader in enumerate(readers[r] for r in ranks):
                            got = measure(reader, stores[codec], idx_path, drop, args.timeout)
                            info = {**base, "reader": reader, "place": place, **got}
                            results.append(info)
                            print(line_of(info, want), flush=True)
                    ratios(results, base)
                group += 1  # the next (rows, order): each codec's cases take the next order on
    finally:
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


def line_of(info: dict[str, Any], want: str) -> str:
    """One row of the table."""
    head = f"{info['codec']:8s} {info['rows']:7d} {info['order']:6s} {info['reader']:11s}"
    if "error" in info:
        return f"{head} failed: {info['error']}"
    t, mb = info["wall_s"], 1e6
    info["equal"] = "n/a" if info["reader"].startswith("cat") else info["sha256"] == want
    return (f"{head} {t:7.2f} {info['out_bytes'] / mb / t:11.1f} {info['disk_bytes'] / mb / t:9.1f} "
            f"{info['disk_bytes'] / mb:8.0f} {info['read_call_bytes'] / mb:8.0f} {info['peak_rss_mb']:11.0f}"
            f"  {info['equal']}")


def ratios(results: list[dict[str, Any]], case: dict[str, Any]) -> None:
    """lazyfuel's time over dask's and TensorStore's for one case (targets 0.7 and 1.0), and
    lazyfuel-to-zarr's over cat's (target 1.1): of the medians and of the bests when a reader ran
    more than once (`--repeat`), with every time; the same for each `lazyfuel@CHECKOUT` reader."""
    times: dict[str, list[float]] = {}
    for r in results:
        if all(r[k] == v for k, v in case.items()) and "wall_s" in r:
            times.setdefault(r["reader"], []).append(r["wall_s"])

    def listed(ts: list[float]) -> str:
        return ", ".join(f"{t:.2f}" for t in ts)

    targets = {"lazyfuel": (("dask", 0.7), ("tensorstore", 1.0), ("cat", 1.1)),
               "lazyfuel-to-zarr": (("cat", 1.1), ("cat-parallel", 1.1))}
    for mine in sorted(t for t in times if t.partition("@")[0] in targets):
        others = targets[mine.partition("@")[0]]
        parts = []
        for other, target in others:
            if mine in times and other in times:
                a, b = times[mine], times[other]
                spread = (f" (best {min(a) / min(b):.2f}x; {mine} {listed(a)} s, {other} {listed(b)} s)"
                          if len(a) + len(b) > 2 else "")
                parts.append(f"{other} {np.median(a) / np.median(b):.2f}x (target <= {target}){spread}")
        if parts:
            label = f"{case['codec']:8s} {case['rows']:7d} {case['order']:6s}"
            print(f"{label} {mine} / " + "; ".join(parts))


if __name__ == "__main__":
    main()
