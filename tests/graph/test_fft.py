"""The FFT family over lazy chunked arrays: numpy.fft's semantics (shapes, dtypes, n, norm), each
provider within its declared precision (normwise per row), the transform axis made whole by a
rechunk, errors at build time, and fusion cut where the selects' and the FFT's backends part.

Few shapes on purpose: PoCL compiles each new VkFFT plan (batch, length, dtype, norm) once, and a
cold plan costs a second or more.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from functools import cache

import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.graph.family import Families
from lazyfuel.graph.fft import Transform
from lazyfuel.graph.fuse import Partition
from lazyfuel.graph.ir import Rechunk
from lazyfuel.graph.lower import lower
from lazyfuel.planner import Planner
from lazyfuel.providers import available_backends, default_registry

RNG = np.random.default_rng(11)
LENGTHS = (16, 12, 17)  # a power of two, a composite, a prime (VkFFT's Bluestein path)
REF = {"fft": np.fft.fft, "ifft": np.fft.ifft, "rfft": np.fft.rfft, "irfft": np.fft.irfft}


@pytest.fixture(params=["cpu", "opencl", "cuda"])
def fft_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Backend:
    """Each FFT provider usable here, forced through `LAZYFUEL_BACKEND`."""
    try:
        (backend,) = available_backends(request.param)
    except RuntimeError as err:
        pytest.skip(str(err))
    monkeypatch.setenv("LAZYFUEL_BACKEND", request.param)
    return backend


def declared(kind: str, dtype: np.dtype, backend: Backend) -> float:
    """The binding's declared `max_relative` (normwise per row)."""
    op, d = OpKind.parse(kind.capitalize()), DType.from_numpy(dtype)
    (binding,) = [b for b in default_registry().bindings()
                  if b.op_kind is op and b.backend is backend and b.dtypes[0] is d]
    return binding.contract.precision.max_relative


def assert_rows_close(got: np.ndarray, want: np.ndarray, axis: int, tol: float) -> None:
    """Per transformed row: max|got - want| <= tol * max|want| (decision 8)."""
    assert got.shape == want.shape, (got.shape, want.shape)
    err = np.max(np.abs(got - want), axis=axis)
    scale = np.max(np.abs(want), axis=axis)
    assert np.all(err <= tol * scale + 1e-30), float(np.max(err / np.maximum(scale, 1e-30)))


def signal(kind: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Finite data of wide range (rows of different scale), of the dtype the transform takes."""
    scale = np.exp2(RNG.integers(-6, 6, size=(*shape[:-1], 1)))
    real = RNG.standard_normal(shape) * scale
    if kind == "irfft" or (kind in ("fft", "ifft") and dtype.kind == "c"):
        return (real + 1j * RNG.standard_normal(shape) * scale).astype(dtype)
    return real.astype(dtype)


def reference(kind: str, a: np.ndarray, **kw) -> np.ndarray:
    """numpy.fft in double precision."""
    wide = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
    return REF[kind](wide, **kw)


CASES = [("fft", np.float32), ("fft", np.complex128), ("ifft", np.complex64), ("ifft", np.float64),
         ("rfft", np.float32), ("rfft", np.float64), ("irfft", np.complex64), ("irfft", np.complex128)]
OUT = {np.float32: np.complex64, np.float64: np.complex128, np.complex64: np.complex64,
       np.complex128: np.complex128}


@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize(("kind", "dtype"), CASES, ids=[f"{k}-{np.dtype(d).name}" for k, d in CASES])
def test_each_transform_matches_numpy_batched_and_chunked(fft_backend, kind, dtype, length):
    dtype = np.dtype(dtype)
    width = length // 2 + 1 if kind == "irfft" else length
    a = signal(kind, (8, width), dtype)
    kw = {"n": length} if kind == "irfft" else {}
    y = getattr(lf, kind)(lf.from_array(a, chunks=(4, width)), **kw)  # one batch size: one plan
    want = reference(kind, a, **kw)
    want_dtype = {np.dtype(np.complex64): np.float32, np.dtype(np.complex128): np.float64}[dtype] \
        if kind == "irfft" else OUT[dtype.type]
    assert (y.shape, y.dtype, y.chunks[0]) == (want.shape, np.dtype(want_dtype), (4, 4))
    got = y.compute()
    assert got.dtype == want_dtype
    assert_rows_close(got, want, -1, declared(kind, dtype, fft_backend))


@pytest.mark.parametrize("kind", ["fft", "rfft", "irfft"])
def test_a_chunked_transform_axis_is_rechunked_whole(fft_backend, kind):
    dtype = np.dtype(np.complex64 if kind == "irfft" else np.float32)
    a = signal(kind, (8, 16), dtype).T.copy()  # transform along axis 0, 16 points in 3 chunks
    x = lf.from_array(a, chunks=(6, 4))
    y = getattr(lf, kind)(x, axis=0, n=30 if kind == "irfft" else None)
    assert isinstance(y._node, Transform) and isinstance(y._node.input, Rechunk)
    assert y.chunks[1] == (4, 4)  # the other axis keeps its chunks
    want = reference(kind, a, axis=0, **({"n": 30} if kind == "irfft" else {}))
    assert_rows_close(y.compute(), want, 0, declared(kind, dtype, fft_backend))


@pytest.mark.parametrize(("n", "norm"), [(None, None), (12, "ortho"), (20, "forward"), (None, "backward")])
def test_n_and_norm_follow_numpy(fft_backend, n, norm):
    """Default, cropped and zero-padded lengths; each norm (each a VkFFT plan of its own)."""
    a = signal("fft", (4, 16), np.dtype(np.float64))
    x = lf.from_array(a, chunks=(2, 16))
    for kind in ("fft", "ifft", "rfft"):
        got = getattr(lf, kind)(x, n=n, norm=norm).compute()
        assert_rows_close(got, reference(kind, a, n=n, norm=norm), -1, 1e-13)
    spectrum = np.fft.rfft(a)
    got = lf.irfft(spectrum, n=n, norm=norm).compute()
    assert_rows_close(got, np.fft.irfft(spectrum, n=n, norm=norm), -1, 1e-13)


def test_methods_and_the_lazy_shape():
    a = signal("fft", (4, 16), np.dtype(np.float32))
    x = lf.from_array(a, chunks=(2, 16))
    assert x.rfft(n=10).name == lf.rfft(x, -1, 10).name != lf.rfft(x).name
    assert x.fft(axis=0).shape == (4, 16) and x.ifft(norm="ortho").dtype == np.complex64
    assert x.rfft().irfft(n=16).dtype == np.float32
    assert lf.rfft(x, n=9).shape == (4, 5) and lf.irfft(lf.rfft(x)).shape == (4, 16)


@pytest.mark.parametrize(("call", "error", "words"), [
    (lambda: lf.fft(np.arange(8)), TypeError,
     "fft takes float32, float64, complex64 or complex128 data, got int64; cast it"),
    (lambda: lf.fft(np.ones(8, np.float16)), TypeError, "got float16; cast it first"),
    (lambda: lf.rfft(np.ones(8, np.complex64)), TypeError, "rfft takes float32 or float64"),
    (lambda: lf.irfft(np.ones(8, np.float32)), TypeError, "irfft takes complex64 or complex128"),
    (lambda: lf.fft(np.ones((2, 8), np.float32), axis=2), IndexError, "dim 2 is out of range"),
    (lambda: lf.fft(np.ones(8, np.float32), n=0), ValueError, "invalid number of data points (0)"),
    (lambda: lf.irfft(np.ones(1, np.complex64)), ValueError, "invalid number of data points (0)"),
    (lambda: lf.fft(np.ones(8, np.float32), n=2.5), TypeError, "n must be an integer"),
    (lambda: lf.fft(np.ones(8, np.float32), norm="none"), ValueError, "invalid norm 'none'"),
    (lambda: lf.fft(np.float32(1)), ValueError, "at least one dimension"),
])
def test_bad_input_is_refused_when_the_op_is_built(call, error, words):
    with pytest.raises(error) as info:
        call()
    assert words in str(info.value)


def test_gather_masked_fill_rfft_runs_lazily_and_matches_numpy():
    v = RNG.standard_normal((40, 64)).astype(np.float32)
    idx = RNG.integers(0, 40, size=(40, 64))
    mask = RNG.random((40, 64)) < 0.1
    x = lf.from_array(v, chunks=(10, 32))
    y = lf.rfft(lf.masked_fill(lf.gather(x, 0, idx), mask, 0.0), axis=-1)
    assert isinstance(y, lf.Array) and y.shape == (40, 33) and y.dtype == np.complex64
    picked = np.where(mask, np.float32(0), np.take_along_axis(v, idx, 0))
    want = np.fft.rfft(picked.astype(np.float64), axis=-1)
    assert_rows_close(y.compute(), want, -1, 1e-5)


def test_fusion_cuts_where_the_preferred_backends_part():
    v = RNG.standard_normal((8, 16)).astype(np.float32)
    y = lf.rfft(lf.masked_fill(lf.gather(v, 1, RNG.integers(0, 16, (8, 16))), v > 1, 0.0))
    fill = y._node.input
    both = Planner(default_registry(), [Backend.Vulkan, Backend.OpenCL, Backend.Cpu])
    assert fill.name in Partition.of(y._node, Families(both)).separate
    cpu_only = Planner(default_registry(), [Backend.Cpu])  # one family: one task
    assert fill.name not in Partition.of(y._node, Families(cpu_only)).separate
    assert fill.name not in Partition.of(y._node).separate  # no rule: fused as before


@dataclass(frozen=True)
class Only:
    """A runtime planning over exactly these backends (priors, no judged costs)."""

    backends: tuple[str, ...]

    def planner(self) -> Planner:
        return _planner(self.backends)

    def applied(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()


@cache
def _planner(names: tuple[str, ...]) -> Planner:
    return Planner(default_registry(), [Backend[n] for n in names])


@pytest.mark.parametrize("fft_name", ["opencl", "cuda"])
def test_selects_on_vulkan_hand_the_fft_to_its_provider_through_host_memory(fft_name: str):
    for name in ("vulkan", fft_name):
        try:
            available_backends(name)
        except RuntimeError as err:
            pytest.skip(str(err))
    from lazyfuel.graph.explain import explain_node

    v = RNG.standard_normal((16, 32)).astype(np.float32)
    idx = RNG.integers(0, 16, size=(16, 32))
    mask = RNG.random((16, 32)) < 0.2
    y = lf.rfft(lf.masked_fill(lf.gather(lf.from_array(v, chunks=(8, 32)), 0, idx), mask, -1.0))
    fft_backend = {"opencl": Backend.OpenCL, "cuda": Backend.Cuda}[fft_name]
    runtime = Only(("Vulkan", fft_backend.name))
    text = explain_node(y._node, runtime, runtime.planner())
    assert "2 fused node(s)" in text
    assert "program on Vulkan" in text and f"program on {fft_backend.name}" in text
    from lazyfuel.graph.crossing import describe

    how = describe(Backend.Vulkan, fft_backend)  # through host memory, or device to device on one GPU
    assert f"crossing: reads fused node 1's result, computed on Vulkan, {how}" in text
    got = lower(y._node, runtime).compute()
    want = np.fft.rfft(np.where(mask, -1.0, np.take_along_axis(v, idx, 0).astype(np.float64)), axis=-1)
    assert_rows_close(got, want, -1, 1e-5)


def test_explain_names_each_fused_nodes_backend():
    v = RNG.standard_normal((8, 16)).astype(np.float32)
    text = lf.explain(lf.rfft(lf.masked_fill(lf.gather(v, 1, RNG.integers(0, 16, (8, 16))), v > 1, 0.0)))
    assert "2 fused node(s)" in text and "chain (one task, one program): Rfft" in text
    assert text.count("program on ") == 2 and text.count("\n  runs on ") == 2
    usable = available_backends("auto")
    fft_backend = next((b for b in usable if b in (Backend.Cuda, Backend.OpenCL)), None)
    if Backend.Vulkan in usable and fft_backend is not None:  # Cuda first where both run
        assert f"cut from fused node 1: its ops prefer Vulkan, this one {fft_backend.name}" in text
