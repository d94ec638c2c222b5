"""Helpers of the FFT tests: data, the double-precision numpy reference, plans, the normwise check.

FFT results are compared normwise per transformed row with numpy.fft in double precision, the
measure both providers' contracts declare: max|got - ref| <= max_relative * max|ref| along the axis.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lazyfuel.backends.base import executor
from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.planner import Chain, OpNode, Planner, Program
from lazyfuel.providers import default_registry, register_builtin_providers, unusable_reason
from lazyfuel.registry import Binding

NUMPY = {OpKind.Fft: np.fft.fft, OpKind.Ifft: np.fft.ifft, OpKind.Rfft: np.fft.rfft,
         OpKind.Irfft: np.fft.irfft}
FFT_KINDS = tuple(NUMPY)
VKFFT_BACKENDS = (Backend.OpenCL, Backend.Cuda)  # the vkfft provider's backends


def usable_executor(backend: Backend) -> Any:
    """`backend`'s executor; the test is skipped, saying why, where the backend cannot run."""
    register_builtin_providers()
    why = unusable_reason(backend)
    if why is not None:
        pytest.skip(f"the {backend.name} backend is not usable here: {why}")
    return executor(backend)


def random_input(rng: np.random.Generator, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    """Normal data of `dtype` (complex: both parts), finite: an FFT of a NaN is all NaN."""
    a = rng.standard_normal(shape)
    if dtype.numpy.kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype.numpy)


def reference(kind: OpKind, x: np.ndarray, axis: int = -1, n: int | None = None,
              norm: str | None = None) -> np.ndarray:
    """numpy.fft in double precision."""
    wide = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
    return NUMPY[kind](wide, n=n, axis=axis, norm=norm)


def row_error(got: np.ndarray, ref: np.ndarray, axis: int = -1) -> float:
    """The largest per-row normwise error: max over rows of max|got - ref| / max|ref| along `axis`."""
    if ref.size == 0:
        return 0.0
    diff = np.abs(got.astype(ref.dtype) - ref).max(axis=axis)
    scale = np.abs(ref).max(axis=axis)
    return float(np.max(np.where(scale > 0, diff / np.where(scale > 0, scale, 1), diff)))


def plan(kind: OpKind | str, array: np.ndarray, backends: list[Backend], axis: int = -1,
         n: int | None = None, norm: str | None = None, planner: Planner | None = None) -> Program:
    """The program one FFT node over `array` gets on `backends` (prior costs)."""
    node = OpNode(str(kind), (0,), (("axis", axis), ("n", n), ("norm", norm)))
    planner = planner or Planner(default_registry(), backends)
    return planner.plan(Chain(1, (node,), (1,)), [DType.from_numpy(array.dtype)], [Layout.of(array)])


def run(program: Program, *inputs: np.ndarray) -> np.ndarray:
    """Run a one-output program on its backend's executor."""
    (out,) = executor(program.backend).run(program, list(inputs))
    return out


def fft_bindings(backend: Backend) -> list[Binding]:
    """Every FFT binding of `backend` in the default registry."""
    register_builtin_providers()
    return [b for b in default_registry().bindings() if b.op_kind in FFT_KINDS and b.backend is backend]


def check(got: np.ndarray, ref: np.ndarray, binding: Binding, axis: int = -1) -> None:
    """Assert `got` has the binding's output dtype and is within its declared max_relative of `ref`."""
    assert got.dtype == binding.dtypes[-1].numpy
    assert got.shape == ref.shape and got.flags.c_contiguous
    error = row_error(got, ref, axis)
    assert error <= binding.contract.precision.max_relative, f"{binding}: row error {error:.3g}"
