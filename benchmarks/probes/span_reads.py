"""lazyfuel's raw-row reads of a zarr store under several read settings, side by side in one
process: the page cache dropped before every compute (root), the configurations alternating
round by round, so a disk whose speed drifts shifts them all alike (issue 19; "out_of_core,
session 8" in ../BENCHMARKS.md).

A configuration is `name=value` pairs of the read settings (`gap`, `range`, `spans`: the
module defaults `GAP_BYTES`, `RANGE_BYTES`, `SPANS_IN_FLIGHT` of `graph.byte_ranges`;
`threads`: the I/O pool's `READ_THREADS`; `map`: `file_spans.MAPPED`, 0 or 1; `cover`:
`stored.WHOLE_COVER` in percent, where a store lazyfuel wrote is read whole; `workers`: dask's threads),
separated by commas, e.g. `spans=4,range=4M` (the empty one is the defaults); `catN` reads the
store's chunk files through N `cat`s at once instead (the disk's own pace, as `out_of_core.py`'s
`cat-parallel`). Each round reads `--idx`'s rows of `--store` with
`lf.index_select(lf.from_zarr(store), 0, idx).compute(num_workers=...)` and reports wall,
user and system CPU seconds, minor and major page faults and the bytes the process read from disk.

    python benchmarks/probes/span_reads.py --store /tmp/ooc/raw.zarr --idx /tmp/ooc/idx-262144-random.npy \
        --configs "" "spans=8" "range=1M,spans=16"
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from disk_depth import drop_caches, size_of  # this folder (drop_caches: out_of_core.py's)

KEYS = ("gap", "range", "spans", "threads", "map", "cover", "workers")


def parsed(text: str) -> dict[str, int]:
    """'gap=64K,spans=8' as {'gap': 65536, 'spans': 8}."""
    out = {}
    for part in filter(None, text.split(",")):
        key, _, value = part.partition("=")
        if key not in KEYS:
            raise SystemExit(f"unknown setting {key!r} in {text!r}; known: {', '.join(KEYS)}")
        out[key] = size_of(value)
    return out


def applied(settings: dict[str, int]) -> dict[str, Any]:
    """Set the read settings (module constants, a fresh I/O pool); dask's compute keywords."""
    from lazyfuel.graph import byte_ranges, file_spans, stored

    defaults = applied.defaults  # type: ignore[attr-defined]
    values = {**defaults, **settings}
    for module in (byte_ranges, stored, file_spans):
        for key, name in (("gap", "GAP_BYTES"), ("range", "RANGE_BYTES"), ("spans", "SPANS_IN_FLIGHT")):
            if hasattr(module, name):
                setattr(module, name, values[key])
    file_spans.MAPPED = bool(values["map"])
    stored.WHOLE_COVER = values["cover"] / 100
    if file_spans.READ_THREADS != values["threads"]:
        file_spans.READ_THREADS = values["threads"]
        file_spans._POOL = file_spans._Pool()
        file_spans.SPAN_SCRATCH = file_spans._Scratch(keep=2 * values["threads"])
    return {"num_workers": values["workers"]}


def catted(store: str, streams: int) -> None:
    """Every file under `store`'s chunk folder `c/` into /dev/null, through `streams` cats at once
    (every streams-th file each)."""
    files = sorted(str(f) for f in Path(store, "c").rglob("*") if f.is_file())
    cats = [subprocess.Popen(["cat", *files[i::streams]], stdout=subprocess.DEVNULL) for i in range(streams)]
    if any(c.wait() for c in cats):
        raise SystemExit("cat failed")


def io_read_bytes() -> int:
    """Bytes this process has read from disk (/proc/self/io)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("read_bytes"):
            return int(line.split()[1])
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--idx", required=True)
    parser.add_argument("--configs", nargs="+", default=[""])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    import lazyfuel as lf
    from lazyfuel.api import DefaultRuntime
    from lazyfuel.graph import byte_ranges, file_spans, stored

    DefaultRuntime.current().planner()
    applied.defaults = {"gap": byte_ranges.GAP_BYTES, "range": byte_ranges.RANGE_BYTES,  # type: ignore
                        "spans": byte_ranges.SPANS_IN_FLIGHT, "threads": file_spans.READ_THREADS,
                        "map": int(getattr(file_spans, "MAPPED", 0)),
                        "cover": round(getattr(stored, "WHOLE_COVER", 1) * 100),
                        "workers": os.cpu_count() or 1}
    idx = np.load(args.idx)
    want = None
    rows = []
    print(f"# {args.store}, {idx.size} rows; defaults {applied.defaults}")  # type: ignore[attr-defined]
    for r in range(args.rounds):
        for text in args.configs:
            cats = int(text[3:]) if text.startswith("cat") else 0
            kwargs = {} if cats else applied(parsed(text))
            if not drop_caches():
                raise SystemExit("cannot drop the page cache (not root)")
            disk, cpu = io_read_bytes(), resource.getrusage(resource.RUSAGE_SELF)
            start = time.perf_counter()
            if cats:  # the disk's own pace: the store's chunk files through `cats` cats at once
                got = want
                catted(args.store, cats)
            else:
                got = lf.index_select(lf.from_zarr(args.store), 0, idx).compute(**kwargs)
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_SELF)
            want = got if want is None else want
            row = {"config": text or "defaults", "round": r, "wall_s": wall,
                   "user_s": after.ru_utime - cpu.ru_utime, "sys_s": after.ru_stime - cpu.ru_stime,
                   "minor_faults": after.ru_minflt - cpu.ru_minflt,
                   "major_faults": after.ru_majflt - cpu.ru_majflt,
                   "disk_mb": (io_read_bytes() - disk) / 1e6, "load": os.getloadavg()[0],
                   "equal": bool(np.array_equal(got, want))}
            rows.append(row)
            print(f"{row['config']:28s} round {r}: {wall:5.2f} s wall, {row['user_s']:4.2f} user, "
                  f"{row['sys_s']:4.2f} sys, {row['minor_faults']}/{row['major_faults']} faults "
                  "(minor/major), "
                  f"{row['disk_mb']:6.0f} MB from disk, load {row['load']:.1f}"
                  f"{'' if row['equal'] else ', NOT EQUAL'}", flush=True)
    for text in args.configs:
        walls = [r["wall_s"] for r in rows if r["config"] == (text or "defaults")]
        print(f"{text or 'defaults':28s} median {np.median(walls):.2f} s, best {min(walls):.2f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
