"""rfft: lazyfuel's FFT providers (VkFFT through pyvkfft on Cuda and OpenCL; numpy.fft on Cpu) vs
numpy and, on a CUDA GPU, CuPy's cuFFT.

For each case, a (batch, length) real array is transformed along its last axis several ways,
interleaved round by round so machine load falls on all alike:

- `numpy`: `numpy.fft.rfft(x)` (pocketfft, one thread; float32 stays float32 with numpy >= 2);
- `lazyfuel cpu`: the plan the planner makes on the Cpu backend, run by `CpuExecutor` (the same
  pocketfft call behind the binding `lazyfuel::cpu::rfft_*`: the difference is lazyfuel's overhead);
- `lazyfuel cuda` / `lazyfuel opencl`, for each of the two that can run here: the plan on that
  backend, run by its executor: upload, VkFFT, download (on PoCL the device reads and writes host
  memory in place: no copies; on CUDA, CuPy's copies from and to pageable host memory);
- where CuPy sees a CUDA GPU: `cupy` (cuFFT on data already on the GPU, synchronized) and
  `cupy + copies` (`cupy.asnumpy(cupy.fft.rfft(cupy.asarray(x)))`, the like of lazyfuel's work);
  and where pyvkfft has its CUDA back end, `vkfft cuda` (VkFFT on the same GPU-resident data: what
  the Cuda provider runs, without its copies).

What is timed is one task's work on one chunk (plan lookup + executor run), as the graph layer runs
it; no dask. The first run of a shape on a lazyfuel device builds its VkFFT app (kernel
compilation; PoCL caches it on disk, so a later process pays less): it is reported apart as
`first run`. Cells are the median of `--repeats` runs (and the best). Results are checked against
numpy.fft in double precision (max row error).

    python benchmarks/fft.py               # the default cases
    python benchmarks/fft.py --repeats 3 --quick
    python benchmarks/fft.py --cases 8192x8192:float32,1024x8191:float32 \\
        --configs "numpy,cupy,cupy + copies,vkfft cuda,lazyfuel cuda"
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


DEVICES = (Backend.Cuda, Backend.OpenCL)  # lazyfuel's FFT devices, as the planner prefers them


def bench(shape: tuple[int, int], dtype: type, repeats: int, keep: set[str] | None = None) -> dict:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)
    ref = np.fft.rfft(x.astype(np.float64))
    configs = {"numpy": lambda: np.fft.rfft(x), "lazyfuel cpu": _runner(Backend.Cpu, x)}
    cp = _cupy()
    if cp is not None:
        configs.update(_cupy_configs(cp, x))
    usable = available_backends()
    configs.update({f"lazyfuel {b.name.lower()}": _runner(b, x) for b in DEVICES if b in usable})
    if keep is not None:
        configs = {name: fn for name, fn in configs.items() if name in keep}
    first = {name: _timed(fn)[0] for name, fn in configs.items()
             if name.startswith("lazyfuel ") and name != "lazyfuel cpu"}
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


def _ratio(t: dict[str, list[float]], over: str, under: str) -> str:
    """`median(over) / median(under)`, e.g. how many times faster `under` runs; '-' without both."""
    if over not in t or under not in t:
        return "-"
    return f"{statistics.median(t[over]) / statistics.median(t[under]):.2f}x"


def table(results: list[dict], header: bool = True) -> str:
    names = list(results[0]["times"])
    devices = [n for n in names if n in results[0]["first"]]
    ratios = [("numpy", d) for d in devices if "numpy" in names]
    ratios += [("cupy + copies", d) for d in devices if "cupy + copies" in names]
    ratios += [("cupy", "vkfft cuda")] if {"cupy", "vkfft cuda"} <= set(names) else []
    head = ["case", "input", *names, *(f"{d} first run" for d in devices),
            *(f"{o} / {u}" for o, u in ratios), "max row error"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] if header else []
    for r in results:
        t = r["times"]
        errs = ", ".join(f"{n} {r['errors'][n]:.1e}" for n in names if n != "numpy")
        cells = [f"{r['shape']} {r['dtype']}", f"{r['mib']:.0f} MiB", *(_ms(t[n]) for n in names),
                 *(f"{r['first'][d] * 1e3:.0f} ms" for d in devices), *(_ratio(t, o, u) for o, u in ratios),
                 errs]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cases(text: str) -> list[tuple[tuple[int, int], type]]:
    """`8192x8192:float32,1024x8191:float64` -> [((8192, 8192), np.float32), ...]."""
    cases = []
    for item in text.split(","):
        shape, _, dtype = item.partition(":")
        rows, cols = (int(v) for v in shape.lower().split("x"))
        cases.append(((rows, cols), np.dtype(dtype or "float32").type))
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="three small cases")
    parser.add_argument("--cases", help="ROWSxLENGTH:dtype,... instead of the default cases")
    parser.add_argument("--configs", help="only these columns, comma-separated (e.g. 'numpy,cupy,lazyfuel "
                        "cuda')")
    args = parser.parse_args()
    cp = _cupy()
    if cp is not None:  # a GPU idles at low clocks: load it for a second first
        a = cp.ones((4096, 4096), cp.float32)
        start = time.perf_counter()
        while time.perf_counter() - start < 1.5:
            a @ a
        cp.cuda.Device().synchronize()
    cases = _cases(args.cases) if args.cases else QUICK if args.quick else CASES
    keep = {c.strip() for c in args.configs.split(",")} if args.configs else None
    usable = available_backends()
    named = ", ".join(f"{b.name} {executor(b).device.name}" for b in DEVICES if b in usable) or "none"
    print(f"# rfft, {date.today()}, {platform.node()} ({os.cpu_count()} CPUs), numpy {np.__version__}, "
          f"lazyfuel FFT devices: {named}; median of {args.repeats}")
    for number, (shape, dtype) in enumerate(cases):  # each row as soon as it is measured
        print(table([bench(shape, dtype, args.repeats, keep)], header=number == 0), flush=True)


if __name__ == "__main__":
    main()
