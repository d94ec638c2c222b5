"""The vkfft provider's Cuda backend without a GPU: its document, link registry, preference over
OpenCL, and how a machine without CUDA treats it (visible, not planned over, named in explain and
skipped by the audit with the reason). Its device tests are test_vkfft_devices.py's, run on a GPU."""

from __future__ import annotations

import numpy as np
import pytest
from fftcheck import FFT_KINDS, fft_bindings

import lazyfuel as lf
import lazyfuel.backends.vkfft as vkfft
from lazyfuel.audit import audit
from lazyfuel.backends.vkfft.cuda import ENV_DEVICE, INSTALL_HINT, _choose
from lazyfuel.backends.vkfft.links import LINK_REGISTRIES, code
from lazyfuel.backends.vkfft.transforms import TRANSFORMS
from lazyfuel.contracts import parse_document
from lazyfuel.contracts.fmt import format_text
from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.planner import Chain, OpNode, Planner
from lazyfuel.providers import CONTRACTS_DIR, available_backends, default_registry, unusable_reason
from lazyfuel.registry import Registry, link_registry
from lazyfuel.registry.registry import canonical
from lazyfuel.support import support_table

CUDA_MD = CONTRACTS_DIR / "vkfft_cuda.md"
OPENCL_MD = CONTRACTS_DIR / "vkfft.md"
no_cuda = pytest.mark.skipif(unusable_reason(Backend.Cuda) is None, reason="Cuda runs here")


def _without_backend(value):
    """A contract's canonical form without what differs between the two documents by design
    (backend, provider, blurb) and where things were written."""
    if isinstance(value, dict):
        return {k: _without_backend(v) for k, v in value.items()
                if k not in ("backend", "provider", "blurb", "key_lines")}
    if isinstance(value, list):
        return [_without_backend(v) for v in value]
    return value


def test_document_is_canonical_and_mirrors_the_opencl_one() -> None:
    text = CUDA_MD.read_text(encoding="utf-8")
    assert format_text(text, str(CUDA_MD)) == text  # `lazyfuel contracts fmt` changes nothing
    cuda, opencl = parse_document(text, str(CUDA_MD)), parse_document(OPENCL_MD.read_text(), str(OPENCL_MD))
    p = cuda.provider
    assert (p.backend, p.kernel_source) == (Backend.Cuda, "vkfft")
    assert p.link_registry == LINK_REGISTRIES[Backend.Cuda]
    assert p.revision_base != opencl.provider.revision_base
    # the same transforms, dtypes, params, caps, precision and determinism: only the backend differs
    assert [c.kernel for c in cuda.contracts] == [c.kernel for c in opencl.contracts]
    for c, o in zip(cuda.contracts, opencl.contracts):
        assert c.backend is Backend.Cuda and "CUDA" in c.blurb
        assert _without_backend(canonical(c)) == _without_backend(canonical(o)), c.kernel


def test_it_fans_into_the_twelve_keys_of_the_opencl_document() -> None:
    vkfft.register()
    cuda, opencl = Registry().load(CUDA_MD), Registry().load(OPENCL_MD)
    assert len(cuda) == 12
    assert {(b.op_kind, b.dtypes) for b in cuda} == {(b.op_kind, b.dtypes) for b in opencl}
    assert all(b.backend is Backend.Cuda and b.kernel_source == "vkfft" for b in cuda)
    assert all(b.kernel_ref.backend is Backend.Cuda for b in cuda)
    assert {b.kernel_ref.impl for b in cuda} == set(TRANSFORMS.values())
    assert not {b.revision_hash for b in cuda} & {b.revision_hash for b in opencl}


def test_each_backend_links_through_its_own_registry() -> None:
    vkfft.register()
    vkfft.register()  # idempotent
    cuda, opencl = (link_registry(LINK_REGISTRIES[b]) for b in (Backend.Cuda, Backend.OpenCL))
    assert set(cuda) == set(opencl) and "lazyfuel::vkfft::irfft_c128" in cuda
    assert {r.backend for r in cuda.values()} == {Backend.Cuda}
    assert {r.backend for r in opencl.values()} == {Backend.OpenCL}


def test_revision_folds_in_the_cuda_driving_code() -> None:
    blob = code(TRANSFORMS["rfft"], Backend.Cuda)
    assert b"class CudaExecutor" in blob and b"class VkFFTExecutor" in blob
    assert b"class OpenCLExecutor" not in blob
    assert b"class OpenCLExecutor" in code(TRANSFORMS["rfft"], Backend.OpenCL)


def test_the_default_registry_and_the_support_table_show_the_cuda_bindings() -> None:
    assert {b.op_kind for b in fft_bindings(Backend.Cuda)} == set(FFT_KINDS)
    table = support_table()
    assert "| Rfft | Cuda | vkfft | F32 F64 |" in table
    assert "| Fft | Cuda | vkfft | F32 C64 F64 C128 |" in table


def _plan(backends: list[Backend], shape=(4096, 4096)):
    node = OpNode("Rfft", (0,), (("axis", -1), ("n", None), ("norm", None)))
    return Planner(default_registry(), backends).plan(Chain(1, (node,), (1,)), [DType.F32],
                                                      [Layout.contiguous(shape)])


def test_where_both_run_a_large_fft_plans_on_cuda_before_opencl() -> None:
    # planning only: the planner takes the backends it is given
    program = _plan([Backend.Cuda, Backend.OpenCL, Backend.Cpu])
    assert program.backend is Backend.Cuda
    assert program.steps[0].binding.symbol == "lazyfuel::vkfft::rfft_f32"
    assert _plan([Backend.OpenCL, Backend.Cpu]).backend is Backend.OpenCL


def test_no_device_and_a_bad_choice_are_errors_naming_the_fix() -> None:
    with pytest.raises(RuntimeError, match=r"no CUDA device found \(CUDA reports 0 devices\)"):
        _choose(0, None)
    with pytest.raises(RuntimeError, match=rf"{ENV_DEVICE}='3' is not a CUDA device number; expected 0 to 1"):
        _choose(2, "3")
    assert (_choose(2, None), _choose(2, "1")) == (0, 1)
    assert "VKFFT_BACKEND=cuda" in INSTALL_HINT and "CuPy" in INSTALL_HINT


@no_cuda
def test_without_cuda_the_bindings_are_visible_but_never_planned_over() -> None:
    assert Backend.Cuda not in available_backends("auto")
    assert "needs" in unusable_reason(Backend.Cuda)  # which module is missing, and the fix
    with pytest.raises(RuntimeError, match=r"backend Cuda was forced .* but cannot run here: the Cuda FFT"):
        available_backends("cuda")
    x = lf.from_array(np.ones((8, 64), np.float32), chunks=(4, 64))
    text = lf.explain(lf.rfft(x))
    why = unusable_reason(Backend.Cuda)
    assert f"Cuda's bindings are not planned over: Cuda is not usable here: {why}" in text
    assert "program on Cuda" not in text
    assert np.allclose(lf.rfft(x).compute(), np.fft.rfft(np.ones((8, 64))))


@no_cuda
def test_without_cuda_the_audit_skips_its_bindings_saying_why() -> None:
    report = audit(select=lambda b: b.backend is Backend.Cuda and b.op_kind is OpKind.Rfft, seed=0)
    assert len(report.results) == 2 and report.ok
    why = unusable_reason(Backend.Cuda)
    assert {r.skipped for r in report.results} == {f"backend Cuda is not usable here: {why}"}
    assert "0 of 0 binding(s) keep their contract (2 skipped" in report.table()


def test_a_forced_backend_leaves_the_others_out_saying_so(monkeypatch) -> None:
    monkeypatch.setenv("LAZYFUEL_BACKEND", "cpu")
    x = lf.from_array(np.ones((4, 32), np.float32), chunks=(2, 32))
    text = lf.explain(lf.rfft(x))
    assert "backends [Cpu]" in text
    assert "Cuda's bindings are not planned over: Cuda is left out by LAZYFUEL_BACKEND=cpu" in text
    assert "OpenCL's bindings are not planned over: OpenCL is left out by LAZYFUEL_BACKEND=cpu" in text
