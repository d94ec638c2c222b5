"""Which provider an FFT gets: OpenCL (vkfft) against Cpu (numpy.fft) by cost, the fallback where
OpenCL cannot run a chain, and what explain shows. Planning only: no device needed."""

from __future__ import annotations

import numpy as np
import pytest
from fftcheck import plan

from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.planner import Chain, OpNode, Planner, describe_program
from lazyfuel.providers import available_backends, default_registry
from lazyfuel.registry import NoBindingError

BOTH = [Backend.OpenCL, Backend.Cpu]


def _plan_shape(kind: OpKind, shape: tuple[int, ...], dtype: DType, backends):
    node = OpNode(kind.name, (0,), (("axis", -1), ("n", None), ("norm", None)))
    return Planner(default_registry(), backends).plan(Chain(1, (node,), (1,)), [dtype],
                                                      [Layout.contiguous(shape)])


def test_by_prior_costs_a_small_fft_stays_on_the_cpu_and_a_large_one_goes_to_opencl() -> None:
    small = _plan_shape(OpKind.Rfft, (4, 64), DType.F32, BOTH)
    large = _plan_shape(OpKind.Rfft, (4096, 4096), DType.F32, BOTH)
    assert small.backend is Backend.Cpu and small.steps[0].binding.symbol == "lazyfuel::cpu::rfft_f32"
    assert large.backend is Backend.OpenCL and large.steps[0].binding.symbol == "lazyfuel::vkfft::rfft_f32"
    assert large.steps[0].out_dtype is DType.C64 and large.steps[0].out_shape == (4096, 2049)


def test_each_op_kind_finds_a_binding_on_both_providers() -> None:
    for kind, dtype in [(OpKind.Fft, DType.F32), (OpKind.Ifft, DType.C128), (OpKind.Rfft, DType.F64),
                        (OpKind.Irfft, DType.C64)]:
        for backend in BOTH:
            program = _plan_shape(kind, (8, 32), dtype, [backend])
            assert program.backend is backend and program.steps[0].binding.op_kind is kind


def test_a_chain_opencl_cannot_run_falls_back_to_the_cpu() -> None:
    chain = Chain(3, (OpNode("Gather", (0, 1), (("dim", 1),)),
                      OpNode("MaskedFill", (3, 2), (("value", 0.0),)),
                      OpNode("Rfft", (4,), (("axis", -1), ("n", None), ("norm", None)))), (5,))
    dtypes = [DType.F32, DType.U32, DType.BOOL]
    layouts = [Layout.contiguous((64, 512)), Layout.contiguous((64, 256)), Layout.contiguous((64, 256))]
    program = Planner(default_registry(), BOTH).plan(chain, dtypes, layouts)
    assert program.backend is Backend.Cpu
    assert "via (Rfft,[F32,C64],Cpu) numpy [lazyfuel::cpu::rfft_f32]" in describe_program(program)
    with pytest.raises(NoBindingError, match=r"OpenCL: no Gather binding for inputs \[F32,U32\]"):
        Planner(default_registry(), [Backend.OpenCL]).plan(chain, dtypes, layouts)


def test_explain_names_the_opencl_binding() -> None:
    program = _plan_shape(OpKind.Irfft, (2048, 1025), DType.C64, [Backend.OpenCL])
    text = describe_program(program)
    assert "program on OpenCL" in text
    assert "via (Irfft,[C64,F32],OpenCL) vkfft [lazyfuel::vkfft::irfft_c64] -> F32[2048, 2048]" in text


def test_a_broadcast_view_plans_without_contiguize() -> None:
    x = np.broadcast_to(np.arange(16, dtype=np.float32), (8, 16))
    assert len(plan(OpKind.Rfft, x, [Backend.OpenCL]).steps) == 1


def test_backend_choice(monkeypatch) -> None:
    monkeypatch.setenv("LAZYFUEL_BACKEND", "cpu")
    assert available_backends() == [Backend.Cpu]
    monkeypatch.delenv("LAZYFUEL_BACKEND")
    found = available_backends()
    assert found[-1] is Backend.Cpu
    if Backend.OpenCL in found:  # where OpenCL runs it comes before the CPU
        assert found.index(Backend.OpenCL) < found.index(Backend.Cpu)
