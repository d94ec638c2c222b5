"""Why a copy shader is slower than vkCmdCopyBuffer on lavapipe: copy-shader variants side by side.

Builds `copy_probe.comp` (beside it) with glslc for each word type (u32, u32x2, u32x4, u64, u64x2) and
memory mode (storage buffers, device addresses), then times each variant given on the command
line (or the default one-factor-at-a-time grid) copying one dense buffer, next to
vkCmdCopyBuffer and numpy's copy. Variants run interleaved, one measurement each per round; the
figure is the median over rounds (the VM is shared: compare ratios, not absolutes).
GB/s = bytes read + written / time.

A variant is `word/mode/L<local>/E<elems>/<n|w>/<s|c>/<h|->`: word type, ssbo|addr, workgroup
size, words per invocation, 32-bit (n) or 64-bit (w) positions, sequential (s) or coalesced (c)
mapping, bounds check hoisted out of the loop (h) or per step (-).

    python benchmarks/probes/copy_probe.py --mib 64 --rounds 7
    python benchmarks/probes/copy_probe.py u32x4/ssbo/L64/E4/n/s/- u64x2/ssbo/L64/E16/n/s/h
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))  # the repository root

import lazyfuel.backends.vulkan.compute_pipelines as compute_pipelines
from lazyfuel.backends.vulkan import get_pool
from lazyfuel.backends.vulkan.kernels import bind

HERE = Path(__file__).resolve().parent
WORDS = {"u32": ("uint", 4), "u32x2": ("uvec2", 8), "u32x4": ("uvec4", 16), "u64": ("uint64_t", 8),
         "u64x2": ("u64vec2", 16), "pair": ("Pair", 32)}
BASE = "u32x4/ssbo/L64/E4/n/s/-"  # what the shipped copy shader did before tuning


def default_grid() -> list[str]:
    """The baseline, then one factor changed at a time, then combinations of the winners."""
    grid = [BASE]
    grid += [f"{w}/ssbo/L64/E4/n/s/-" for w in ("u32", "u32x2", "u64", "u64x2")]
    grid += [f"u32x4/ssbo/L{g}/E4/n/s/-" for g in (1, 8, 32, 256, 1024)]
    grid += [f"u32x4/ssbo/L64/E{e}/n/s/-" for e in (1, 16, 64)]
    grid += ["u32x4/ssbo/L64/E4/n/c/-", "u32x4/ssbo/L64/E4/w/s/-", "u32x4/addr/L64/E4/n/s/-",
             "u32x4/addr/L64/E4/w/s/-", "u32x4/ssbo/L64/E4/n/s/h", "u32x4/ssbo/L64/E16/n/s/h"]
    grid += [f"u64x2/ssbo/L{g}/E{e}/n/s/h" for g, e in ((64, 4), (64, 16), (256, 4), (256, 16), (1024, 4))]
    grid += ["u64x2/ssbo/L64/E16/n/c/h", "u64/ssbo/L64/E16/n/s/h"]
    return grid


def build(out: Path) -> None:
    """Compile every word type x memory mode into `out` as probe_<word>_<mode>.spv."""
    for word, (glsl, nbytes) in WORDS.items():
        for mode, flags in (("ssbo", ["-DSSBO"]), ("addr", [])):
            flags = [*flags, *(["-DPAIR"] if word == "pair" else [])]
            subprocess.run(["glslc", "--target-env=vulkan1.2", "-O", f"-DWORD={glsl}", f"-DWBYTES={nbytes}",
                            *flags, str(HERE / "copy_probe.comp"), "-o",
                            str(out / f"probe_{word}_{mode}.spv")], check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="*", help="variants (default: the built-in grid)")
    parser.add_argument("--mib", type=int, default=64, help="buffer size in MiB")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--reps", type=int, default=2, help="copies per command buffer")
    args = parser.parse_args(argv)
    variants = args.variants or default_grid()
    pool = get_pool()
    nbytes = args.mib << 20
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp))
        compute_pipelines.SPIRV_DIR = Path(tmp)  # probe modules only; the shipped ones are not used here
        src, dst = pool.allocator.alloc(nbytes), pool.allocator.alloc(nbytes)
        with pool.batch() as batch:
            batch.upload(src, np.random.default_rng(0).integers(0, 256, nbytes, dtype=np.uint8))
            batch.run()
        host = np.random.default_rng(1).integers(0, 256, nbytes, dtype=np.uint8)
        recorders = {"vkCmdCopyBuffer": lambda b: b.copy(src, 0, dst, 0, nbytes)}
        for v in variants:
            recorders[v] = recorder(pool, v, src, dst, nbytes)
        times: dict[str, list[float]] = {k: [] for k in [*recorders, "numpy copy"]}
        for _ in range(args.rounds):
            for name, record in recorders.items():
                with pool.batch() as batch:
                    for _ in range(args.reps):
                        record(batch)
                        batch.barrier()
                    t = time.perf_counter()
                    batch.run()
                    times[name].append((time.perf_counter() - t) / args.reps)
            t = time.perf_counter()
            host.copy()
            times["numpy copy"].append(time.perf_counter() - t)
        check(pool, src, dst, nbytes)
        pool.allocator.free(src)
        pool.allocator.free(dst)
    info = pool.info
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"device: {info.name} ({info.driver_info}); {os.cpu_count()} CPUs; load average {load}; "
          f"LP_NUM_THREADS={os.environ.get('LP_NUM_THREADS', '-')}")
    print(f"buffer {args.mib} MiB, {args.rounds} rounds x {args.reps} copies; "
          "GB/s = read + written / median time")
    base = statistics.median(times[BASE]) if BASE in times else None
    for name, ts in times.items():
        med = statistics.median(ts)
        rel = f"{base / med:6.2f}x base" if base else ""
        print(f"{name:<28}{2 * nbytes / med / 1e9:8.2f} GB/s  (min {2 * nbytes / min(ts) / 1e9:6.2f})  {rel}")
    return 0


def recorder(pool, variant: str, src, dst, nbytes: int):
    """A function recording one copy of the whole buffer with `variant` into a batch."""
    word, mode, local, elems, width, mapping, hoist = variant.split("/")
    wbytes = WORDS[word][1]
    local_size, per = int(local[1:]), int(elems[1:])
    spec = (local_size, per, int(width == "w"), 1, int(mapping == "c"), int(hoist == "h"))
    pipeline = pool.pipelines.get(f"probe_{word}_{mode}", spec)
    words = nbytes // wbytes
    values = [src.address, dst.address, 0, words]
    whole = bind(dst, nbytes)
    buffers = (bind(src, nbytes), whole, whole, whole) if mode == "ssbo" else None
    return lambda b: b.dispatch(pipeline, "<QQQQ", list(values), 2, words, local_size * per, buffers)


def check(pool, src, dst, nbytes: int) -> None:
    """The last copy made dst equal src (every variant wrote the same bytes)."""
    a, b = np.empty(nbytes, np.uint8), np.empty(nbytes, np.uint8)
    with pool.batch() as batch:
        batch.download(src, a)
        batch.download(dst, b)
        batch.run()
    if not np.array_equal(a, b):
        raise SystemExit("copy mismatch")


if __name__ == "__main__":
    sys.exit(main())
