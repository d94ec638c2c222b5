"""The CPU link registry, provider registration, and the CPU contract document linking through them."""

from __future__ import annotations

from pathlib import Path

import pytest

import lazyfuel.backends.cpu as cpu
from lazyfuel.backends.base import executor
from lazyfuel.backends.cpu import kernels
from lazyfuel.backends.cpu.executor import CpuExecutor
from lazyfuel.backends.cpu.links import KERNELS, LINK_REGISTRY, entry_points
from lazyfuel.contracts import parse_contracts
from lazyfuel.contracts.model import AwkwardLayoutStrategy, Backend, Determinism, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.registry import Registry, link_registry

CPU_MD = Path(cpu.__file__).parents[2] / "contracts" / "cpu.md"
FFT_KINDS = {OpKind.Fft, OpKind.Ifft, OpKind.Rfft, OpKind.Irfft}


def test_entry_points_cover_every_kernel_and_dtype():
    refs = entry_points()
    assert len(refs) == len(KERNELS) * len(DType)
    for base, fn in KERNELS.items():
        shared = refs[f"lazyfuel::cpu::{base}_f32"]
        assert shared.backend is Backend.Cpu and shared.impl is fn
        assert shared.name == f"lazyfuel::cpu::{base}"
        for dtype in DType:
            assert refs[f"lazyfuel::cpu::{base}_{dtype.suffix}"] is shared


def test_kernel_code_is_the_kernels_source():
    ref = entry_points()["lazyfuel::cpu::gather_u8"]
    code = ref.code()
    assert code.startswith(b"gather_step\n")
    assert b"def gather_step(" in code
    assert entry_points()["lazyfuel::cpu::gather_u8"].code() == code  # stable
    assert ref.impl is kernels.gather_step


def test_register_is_idempotent_and_registers_links_and_executor():
    cpu.register()
    cpu.register()
    assert set(link_registry(LINK_REGISTRY)) == set(entry_points())
    assert isinstance(executor(Backend.Cpu), CpuExecutor)


def test_document_parses_with_the_expected_contracts():
    contracts = parse_contracts(str(CPU_MD))
    assert [c.op_kind for c in contracts[:4]] == [OpKind.IndexSelect, OpKind.Gather, OpKind.MaskedFill,
                                                  OpKind.Contiguize]
    assert [c.op_kind for c in contracts[4:6]] == [OpKind.IndexSelect, OpKind.Gather]  # I64 indices
    assert {c.op_kind for c in contracts[6:]} == FFT_KINDS  # tests/backends/vkfft/test_cpu_fft.py
    for c in contracts[:6]:
        assert c.backend is Backend.Cpu and c.kernel_source == "numpy"
        assert c.provider.link_registry == LINK_REGISTRY
        assert c.caps.awkward_layout_strategy is AwkwardLayoutStrategy.native_strided
        assert c.determinism is Determinism.bitwise and c.precision.max_ulp == 0
        assert c.fanned_input.dtypes == tuple(DType)


@pytest.fixture(scope="module")
def bindings():
    cpu.register()
    return Registry().load(CPU_MD)


def test_document_links_into_66_bindings(bindings):
    assert len(bindings) == 6 * len(DType) + 12  # + the FFT family: 12
    bindings = [b for b in bindings if b.op_kind not in FFT_KINDS]
    assert len(bindings) == 6 * len(DType)
    keys = {(b.op_kind, b.dtypes) for b in bindings}
    for t in DType:
        for index in (DType.U32, DType.I64):  # I64: the kernels for axes past 2**32
            assert (OpKind.IndexSelect, (t, index, t)) in keys
            assert (OpKind.Gather, (t, index, t)) in keys
        assert (OpKind.MaskedFill, (t, DType.BOOL, t)) in keys
        assert (OpKind.Contiguize, (t, t)) in keys
    assert all(b.kernel_ref.impl in KERNELS.values() for b in bindings)


def test_revision_hashes_are_stable(bindings):
    again = Registry().load(CPU_MD)
    assert [b.revision_hash for b in bindings] == [b.revision_hash for b in again]


def test_lookup_accepts_awkward_layouts(bindings):
    registry = Registry()
    registry.load(CPU_MD)
    reversed_view = Layout((4, 3), (-3, 0), 9)
    found = registry.lookup("Gather", ["F32", "U32", "F32"], "Cpu",
                            layouts=[reversed_view, Layout.contiguous((4, 3))])
    assert found.symbol == "lazyfuel::cpu::gather_f32"
