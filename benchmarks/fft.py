"""rfft: lazyfuel's OpenCL (VkFFT through pyvkfft, PoCL here) and CPU (numpy.fft) bindings vs numpy.

For each case, a (batch, length) real array is transformed along its last axis three ways,
interleaved round by round so machine load falls on all alike:

- `numpy`: `numpy.fft.rfft(x)` (pocketfft, one thread; float32 stays float32 with numpy >= 2);
- `lazyfuel cpu`: the plan the planner makes on the Cpu backend, run by `CpuExecutor` (the same
  pocketfft call behind the binding `lazyfuel::cpu::rfft_*`: the difference is lazyfuel's overhead);
- `lazyfuel opencl`: the plan on the OpenCL backend, run by `OpenCLExecutor`: upload, VkFFT, download
  (on PoCL the device reads and writes host memory in place: no copies);
- where CuPy sees a CUDA GPU: `cupy` (cuFFT on data already on the GPU, synchronized) and
  `cupy + copies` (`cupy.asnumpy(cupy.fft.rfft(cupy.asarray(x)))`, the like of lazyfuel's work);
  and where pyvkfft has its CUDA back end, `vkfft cuda` (VkFFT on the same GPU-resident data: what a
  Cuda provider would run).

What is timed is one task's work on one chunk (plan lookup + executor run), as the graph layer runs
it; no dask. The first OpenCL run of a shape builds its VkFFT app (kernel compilation; PoCL caches
it on disk, so a later process pays less): it is reported apart as `first`. Cells are the median of
`--repeats` runs (and the best). Results are checked against numpy.fft in double precision.

    python benchmarks/fft.py               # the default cases
    python benchmarks/fft.py --repeats 3 --quick
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from datetime import date

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from lazyfuel.backends.base import executor
from lazyfuel.contracts.model import Backend
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.planner import Chain, OpNode, Planner
from lazyfuel.providers import available_backends, default_registry

CASES = [((4096, 1024), np.float32), ((1024, 4096), np.float32), ((64, 65536), np.float32),
         ((16, 1 << 20), np.float32), ((1024, 4099), np.float32), ((1024, 4096), np.float64),
         ((64, 65536), np.float64)]
QUICK = [((1024, 4096), np.float32), ((1024, 4099), np.float32), ((256, 4096), np.float64)]
CHAIN = Chain(1, (OpNode("Rfft", (0,), (("axis", -1), ("n", None), ("norm", None))),), (1,))


def _runner(backend: Backend, x: np.ndarray):
    planner = Planner(default_registry(), [backend])
    run = executor(backend).run
    dtype, layout = [DType.from_numpy(x.dtype)], [Layout.of(x)]

    def go() -> np.ndarray:
        return run(planner.plan(CHAIN, dtype, layout), [x])[0]
    return go


def _timed(fn) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def _error(got: np.ndarray, ref: np.ndarray) -> float:
    return float((np.abs(got - ref).max(axis=-1) / np.abs(ref).max(axis=-1)).max())


def _cupy():
    """The cupy module where it sees a CUDA GPU, else None."""
    try:
        import cupy

        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:  # no cupy, no driver, no GPU
        return None


def _cupy_configs(cp, x: np.ndarray) -> dict:
    on_gpu = cp.asarray(x)

    def resident() -> np.ndarray:
        out = cp.fft.rfft(on_gpu)
        cp.cuda.Device().synchronize()
        return out

    def copies() -> np.ndarray:
        return cp.asnumpy(cp.fft.rfft(cp.asarray(x)))
    configs = {"cupy": resident, "cupy + copies": copies}
    try:
        from pyvkfft.cuda import VkFFTApp
    except ImportError:
        return configs
    out = cp.empty((x.shape[0], x.shape[1] // 2 + 1), np.result_type(x.dtype, np.complex64))
    app = VkFFTApp(x.shape, x.dtype, ndim=1, inplace=False, r2c=True)

    def vkfft() -> np.ndarray:
        app.fft(on_gpu, out)
        cp.cuda.Device().synchronize()
        return out
    configs["vkfft cuda"] = vkfft
    return configs


def bench(shape: tuple[int, int], dtype: type, repeats: int) -> dict:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)
    ref = np.fft.rfft(x.astype(np.float64))
    configs = {"numpy": lambda: np.fft.rfft(x), "lazyfuel cpu": _runner(Backend.Cpu, x)}
    cp = _cupy()
    if cp is not None:
        configs.update(_cupy_configs(cp, x))
    first = None
    if Backend.OpenCL in available_backends():
        configs["lazyfuel opencl"] = _runner(Backend.OpenCL, x)
        first, _ = _timed(configs["lazyfuel opencl"])
    times: dict[str, list[float]] = {name: [] for name in configs}
    errors: dict[str, float] = {}
    for name, fn in configs.items():  # warm-up, and the accuracy check
        out = _timed(fn)[1]
        errors[name] = _error(out if isinstance(out, np.ndarray) else cp.asnumpy(out), ref)
    for _ in range(repeats):
        for name, fn in configs.items():
            times[name].append(_timed(fn)[0])
    return {"shape": shape, "dtype": np.dtype(dtype).name, "first": first, "times": times,
            "errors": errors, "mib": x.nbytes / 2**20}


def _ms(ts: list[float]) -> str:
    return f"{statistics.median(ts) * 1e3:.1f} ms (min {min(ts) * 1e3:.1f})"


def table(results: list[dict]) -> str:
    names = list(results[0]["times"])
    head = ["case", "input", *names, "opencl first run", "numpy / opencl", "max row error (lazyfuel)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        t = r["times"]
        ratio = (f"{statistics.median(t['numpy']) / statistics.median(t['lazyfuel opencl']):.2f}x"
                 if "lazyfuel opencl" in t else "-")
        first = f"{r['first'] * 1e3:.0f} ms" if r["first"] is not None else "-"
        errs = ", ".join(f"{r['errors'][n]:.1e}" for n in names if n.startswith("lazyfuel"))
        cells = [f"{r['shape']} {r['dtype']}", f"{r['mib']:.0f} MiB", *(_ms(t[n]) for n in names),
                 first, ratio, errs]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="three small cases")
    args = parser.parse_args()
    cp = _cupy()
    if cp is not None:  # a GPU idles at low clocks: load it for a second first
        a = cp.ones((4096, 4096), cp.float32)
        start = time.perf_counter()
        while time.perf_counter() - start < 1.5:
            a @ a
        cp.cuda.Device().synchronize()
    results = [bench(shape, dtype, args.repeats) for shape, dtype in (QUICK if args.quick else CASES)]
    opencl = executor(Backend.OpenCL).device.name if Backend.OpenCL in available_backends() else "none"
    print(f"# rfft, {date.today()}, {platform.node()} ({os.cpu_count()} CPUs), numpy {np.__version__}, "
          f"OpenCL device: {opencl}; median of {args.repeats}")
    print(table(results))


if __name__ == "__main__":
    main()
