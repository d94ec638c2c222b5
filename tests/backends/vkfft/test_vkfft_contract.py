"""The vkfft provider without a device: its document, link registry, registration (its revision and
staging: test_vkfft_links, test_vkfft_transforms)."""

from __future__ import annotations

from pathlib import Path

import pytest

import lazyfuel.backends.vkfft as vkfft
from lazyfuel.backends.vkfft.device import INSTALL_HINT, _choose, thread_stack
from lazyfuel.backends.vkfft.links import LINK_REGISTRY, entry_points
from lazyfuel.backends.vkfft.transforms import TRANSFORMS
from lazyfuel.contracts import parse_document
from lazyfuel.contracts.fmt import format_text
from lazyfuel.contracts.model import AwkwardLayoutStrategy, Backend, ContractError, Determinism, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.registry import Registry, link_registry

VKFFT_MD = Path(vkfft.__file__).parents[2] / "contracts" / "vkfft.md"
TEXT = VKFFT_MD.read_text(encoding="utf-8")
C, R = (DType.C64, DType.C128), (DType.F32, DType.F64)


@pytest.fixture(scope="module")
def bindings():
    vkfft.register()
    return Registry().load(VKFFT_MD)


def test_document_is_canonical_and_declares_the_family() -> None:
    assert format_text(TEXT, str(VKFFT_MD)) == TEXT  # `lazyfuel contracts fmt` changes nothing
    doc = parse_document(TEXT, str(VKFFT_MD))
    p = doc.provider
    assert (p.backend, p.kernel_source, p.link_registry) == (Backend.OpenCL, "vkfft", LINK_REGISTRY)
    assert [c.kernel for c in doc.contracts] == [f"{k}_{p}" for k in TRANSFORMS for p in ("single", "double")]
    for c in doc.contracts:
        single = c.inputs[0].dtypes[0] in (DType.F32, DType.C64)
        assert c.precision.max_relative == (1e-5 if single else 1e-13)
        assert c.determinism is Determinism.run_to_run
        assert c.caps.awkward_layout_strategy is AwkwardLayoutStrategy.native_strided
        assert c.cost.provenance.name == "judge_measured"
        assert c.op_params.names == ("shape", "axis", "length", "norm", "log2_length")


def test_it_fans_into_twelve_keys(bindings) -> None:
    keys = {(b.op_kind, b.dtypes) for b in bindings}
    expected = {(OpKind.Fft, (t, {DType.F32: DType.C64, DType.F64: DType.C128}.get(t, t))) for t in (*R, *C)}
    expected |= {(OpKind.Ifft, (t, o)) for (_, (t, o)) in expected}
    expected |= {(OpKind.Rfft, (DType.F32, DType.C64)), (OpKind.Rfft, (DType.F64, DType.C128)),
                 (OpKind.Irfft, (DType.C64, DType.F32)), (OpKind.Irfft, (DType.C128, DType.F64))}
    assert keys == expected and len(bindings) == 12
    assert all(b.backend is Backend.OpenCL and b.kernel_source == "vkfft" for b in bindings)
    assert {b.kernel_ref.impl for b in bindings} == set(TRANSFORMS.values())


def test_link_registry_binds_only_the_dtypes_each_transform_takes() -> None:
    vkfft.register()
    vkfft.register()  # idempotent
    refs = link_registry(LINK_REGISTRY)
    assert set(refs) == set(entry_points())
    assert "lazyfuel::vkfft::rfft_f32" in refs and "lazyfuel::vkfft::rfft_c64" not in refs
    bad = TEXT.replace("dtypes: [F32]", "dtypes: [F32, C64]", 1)  # rfft_single on complex input
    with pytest.raises(ContractError, match="entry point 'lazyfuel::vkfft::rfft_c64' is not in link"):
        Registry().add_document(parse_document(bad, "vkfft.md"))


def test_no_device_is_an_error_naming_the_fix() -> None:
    with pytest.raises(RuntimeError, match=r"no OpenCL device found; install an OpenCL driver, e\.g\. "
                                           r"apt install pocl-opencl-icd"):
        _choose([], None)
    assert "VKFFT_BACKEND=opencl pip install 'lazyfuel[fft]'" in INSTALL_HINT


def test_thread_stack_is_restored() -> None:
    import ctypes

    libc = ctypes.CDLL(None)
    if not hasattr(libc, "pthread_getattr_default_np"):
        pytest.skip("not glibc")

    def default_stack() -> int:
        attr, size = ctypes.create_string_buffer(256), ctypes.c_size_t()
        libc.pthread_getattr_default_np(attr)
        libc.pthread_attr_getstacksize(attr, ctypes.byref(size))
        return size.value

    before = default_stack()
    with thread_stack(64 << 20) as applied:
        assert applied and default_stack() == 64 << 20
    assert default_stack() == before
