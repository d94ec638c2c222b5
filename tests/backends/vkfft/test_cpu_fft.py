"""The CPU provider's numpy.fft bindings (the fallback where no OpenCL device exists) and the FFT
reference functions: numpy's results and semantics within the declared precision, any layout."""

from __future__ import annotations

import numpy as np
import pytest
from fftcheck import check, fft_bindings, plan, random_input, reference, row_error, run

from lazyfuel.backends.cpu import fft as cpu_fft
from lazyfuel.contracts.model import Backend, Determinism, OpKind
from lazyfuel.dtypes import DType

CPU = [Backend.Cpu]


@pytest.mark.parametrize("batch", [(), (4,), (2, 3)], ids=["single", "batched", "batched-2d"])
@pytest.mark.parametrize("length", [1, 2, 16, 12, 17, 97, 1000, 1009])
@pytest.mark.parametrize("binding", fft_bindings(Backend.Cpu), ids=str)
def test_every_binding_matches_numpy(binding, length: int, batch: tuple[int, ...]) -> None:
    kind = binding.op_kind
    points = length // 2 + 1 if kind is OpKind.Irfft else length
    x = random_input(np.random.default_rng(length), binding.dtypes[0], (*batch, points))
    program = plan(kind, x, CPU, n=length)
    assert [s.binding for s in program.steps] == [binding]
    check(run(program, x), reference(kind, x, n=length), binding)


@pytest.mark.parametrize("norm", [None, "backward", "ortho", "forward"])
@pytest.mark.parametrize("kind", [OpKind.Fft, OpKind.Ifft, OpKind.Rfft, OpKind.Irfft])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_axis_n_and_norm_follow_numpy_on_awkward_views(kind: OpKind, axis: int, norm: str | None) -> None:
    dtype = DType.C128 if kind in (OpKind.Ifft, OpKind.Irfft) else DType.F64
    x = random_input(np.random.default_rng(2), dtype, (9, 7, 6))[::-1, ::2].transpose(2, 0, 1)  # (6, 9, 4)
    for n in (None, 5, 11):
        program = plan(kind, x, CPU, axis=axis, n=n, norm=norm)
        assert len(program.steps) == 1  # numpy reads any view: no Contiguize
        check(run(program, x), reference(kind, x, axis=axis, n=n, norm=norm), program.steps[0].binding,
              axis=axis)


def test_declarations() -> None:
    bindings = fft_bindings(Backend.Cpu)
    assert len(bindings) == 12
    for b in bindings:
        single = b.dtypes[0] in (DType.F32, DType.C64)
        assert b.contract.precision.max_relative == (1e-5 if single else 1e-13)
        assert b.contract.determinism is Determinism.run_to_run and b.kernel_source == "numpy"


def test_reference_functions_give_the_promised_dtypes() -> None:
    x32 = np.linspace(-1, 1, 12, dtype=np.float32)
    assert cpu_fft.fft(x32).dtype == np.complex64 and cpu_fft.ifft(x32).dtype == np.complex64
    assert cpu_fft.rfft(x32).dtype == np.complex64 and cpu_fft.rfft(x32).shape == (7,)
    assert cpu_fft.irfft(cpu_fft.rfft(x32)).dtype == np.float32
    assert cpu_fft.rfft(x32.astype(np.float64), n=5).dtype == np.complex128
    assert row_error(cpu_fft.irfft(cpu_fft.rfft(x32), n=12), x32.astype(np.float64)) < 1e-6


@pytest.mark.parametrize(("fn", "dtype", "accepted"), [
    (cpu_fft.rfft, np.complex64, "float32, float64"), (cpu_fft.irfft, np.float32, "complex64, complex128"),
    (cpu_fft.fft, np.int32, "float32, float64, complex64, complex128")])
def test_reference_refuses_other_dtypes(fn, dtype, accepted: str) -> None:
    with pytest.raises(TypeError, match=f"takes {accepted} input, got {np.dtype(dtype)}; cast it first"):
        fn(np.zeros(4, dtype))


def test_steps_ignore_the_cost_only_param() -> None:
    x = np.arange(8.0)
    out = cpu_fft.rfft_step(x, shape=(8,), axis=0, length=8, norm="ortho", log2_length=3)
    assert np.allclose(out, np.fft.rfft(x, norm="ortho")) and out.flags.c_contiguous
