"""gather -> masked_fill -> rfft through the lazy API, the Vulkan -> FFT crossing on and off.

The selects run on the Vulkan pool, the rfft on the FFT provider the planner prefers (Cuda on an
NVIDIA GPU): two tasks per block. `LAZYFUEL_CROSSING=auto` hands the select result over in exported
device memory where both sides are the same GPU; `host` brings it back as a numpy chunk and uploads
it again. Each setting is timed `--repeats` times (after a warm-up run that builds the pipelines and
VkFFT apps), interleaved; the result is checked against numpy.fft (max row error, float64
reference) and `lf.explain` is printed for each setting, so the crossing line shows what ran.

    python benchmarks/probes/crossing.py                        # (8192, 8192) float32, chunks of 1024 rows
    python benchmarks/probes/crossing.py --shape 2048x4096 --rows 512 --repeats 2
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import lazyfuel as lf


def build(v: np.ndarray, idx: np.ndarray, mask: np.ndarray, rows: int) -> lf.Array:
    """The lazy pipeline over `v` in chunks of `rows` rows (the transform axis whole)."""
    x = lf.from_array(v, chunks=(rows, v.shape[1]))
    return lf.rfft(lf.masked_fill(lf.gather(x, 0, idx), mask, 0.0), axis=-1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="8192x8192")
    ap.add_argument("--rows", type=int, default=1024, help="rows per chunk")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    n, m = (int(s) for s in args.shape.split("x"))
    rng = np.random.default_rng(0)
    v = rng.standard_normal((n, m), dtype=np.float32)
    idx = rng.integers(0, n, size=(n, m)).astype(np.uint32)
    mask = rng.random((n, m)) < 0.1
    out = np.empty((n, m // 2 + 1), np.complex64)
    times: dict[str, list[float]] = {"auto": [], "host": []}
    for setting in times:  # warm up, explain
        with lf.config(crossing=setting):
            y = build(v, idx, mask, args.rows)
            print(f"--- LAZYFUEL_CROSSING={setting}\n{lf.explain(y)}\n", flush=True)
            y.compute(out=out)
    for _ in range(args.repeats):
        for setting, found in times.items():
            y = build(v, idx, mask, args.rows)
            with lf.config(crossing=setting), lf.profile() as p:
                start = time.perf_counter()
                y.compute(out=out)
                found.append(time.perf_counter() - start)
            print(f"{setting:5s} {found[-1]:7.3f} s  downloaded {p.bytes_downloaded / 2**20:8.1f} MiB  "
                  f"uploaded {p.bytes_uploaded / 2**20:8.1f} MiB", flush=True)
    picked = np.where(mask, np.float32(0), np.take_along_axis(v, idx.astype(np.int64), 0))
    want = np.fft.rfft(picked.astype(np.float64), axis=-1)
    for setting in times:  # check each setting's result
        build(v, idx, mask, args.rows).compute(out=out, crossing=setting)
        err = float(np.max(np.max(np.abs(out - want), axis=-1) / np.max(np.abs(want), axis=-1)))
        verdict = "ok" if err < 1e-5 else "FAIL"
        print(f"{setting:5s} max row error vs numpy.fft (float64): {err:.2e} {verdict}")
    gb = (v.nbytes + idx.nbytes + mask.nbytes + out.nbytes) / 1e9
    for setting, found in times.items():
        best, median = min(found), statistics.median(found)
        print(f"{args.shape} f32 chunks of {args.rows} rows, crossing {setting:4s}: median {median:.3f} s, "
              f"best {best:.3f} s ({gb / best:.2f} GB/s of host data)")
    speedup = statistics.median(times["host"]) / statistics.median(times["auto"])
    print(f"device crossing speedup (median): {speedup:.2f}x")


if __name__ == "__main__":
    main()
