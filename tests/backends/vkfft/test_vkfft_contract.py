"""The vkfft provider without a device: its document, link registry, registration and revision."""

from __future__ import annotations

from pathlib import Path

import pytest

import lazyfuel.backends.vkfft as vkfft
from lazyfuel.backends.vkfft.device import INSTALL_HINT, _choose, thread_stack
from lazyfuel.backends.vkfft.links import LINK_REGISTRY, code, entry_points
from lazyfuel.backends.vkfft.transforms import TRANSFORMS, stage, unstage
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


def test_revision_folds_in_the_pyvkfft_version_and_the_driving_code() -> None:
    blob = code(TRANSFORMS["rfft"])
    assert blob.startswith(b"rfft r2c=True inverse=False pyvkfft=")
    assert b"class OpenCLExecutor" in blob and b"def stage(" in blob
    assert code(TRANSFORMS["irfft"]) != blob


def test_stage_moves_crops_pads_and_casts_in_one_copy() -> None:
    import numpy as np

    a = np.arange(24.0).reshape(2, 3, 4)
    staged = stage(a, 1, 5, np.dtype(np.complex64))
    assert staged.shape == (8, 5) and staged.dtype == np.complex64 and staged.flags.c_contiguous
    assert np.array_equal(staged[:, :3].real.reshape(2, 4, 3), np.moveaxis(a, 1, -1))
    assert not staged[:, 3:].any()
    same = np.ascontiguousarray(a, np.float32)
    assert np.shares_memory(stage(same, 2, 4, np.dtype(np.float32)), same)  # nothing to do: no copy
    assert not np.shares_memory(stage(same, 2, 4, np.dtype(np.float32), fresh=True), same)
    back = unstage(np.moveaxis(a, 1, -1).reshape(8, 3), (2, 3, 4), 1)
    assert np.array_equal(back, a) and back.flags.c_contiguous


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
