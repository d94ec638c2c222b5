"""The audit: the default registry keeps its contracts on this machine's devices (the FFT bindings
of the Cpu and OpenCL providers included), and broken real kernels (a flipped bit, a wrong index, a
result that changes between runs or with the chunking, a Vulkan binding dispatching its shader with
the wrong fill, an FFT that conjugates its result or drops the norm) fail it with a precise report."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from lazyfuel import audit as audit_module
from lazyfuel.audit import audit
from lazyfuel.backends.cpu import fft, kernels
from lazyfuel.cli import main
from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.ops import spec_for
from lazyfuel.providers import CONTRACTS_DIR, available_backends, default_registry
from lazyfuel.registry import KernelRef, Registry, register_link_registry
from lazyfuel.registry.signature import op_signature

HAS_VULKAN = Backend.Vulkan in available_backends()
HAS_OPENCL = Backend.OpenCL in available_backends()
FFT_KINDS = {OpKind.Fft, OpKind.Ifft, OpKind.Rfft, OpKind.Irfft}


def _document(source: Path, kernel: str, links: str, *, max_ulp: int = 0,
              determinism: str = "bitwise") -> str:
    """One kernel block of a shipped document, for F32 only, linked through `links`."""
    text = source.read_text(encoding="utf-8")
    front = text[: text.index("\n---\n", 4) + 5]
    block = next(b for b in re.findall(r"```fkc\n(.*?)```", text, re.S) if f"kernel: {kernel}\n" in b)
    old_links = re.search(r'link_registry: "([^"]+)"', front).group(1)
    namespace = old_links.rsplit("::", 1)[0]
    block = re.sub(r"dtypes: \[[A-Z0-9, ]*F32[A-Z0-9, ]*\]", "dtypes: [F32]", block, count=1)
    block = block.replace(f'"{namespace}::', f'"{links}::').replace("max_ulp: 0", f"max_ulp: {max_ulp}")
    block = re.sub(r"determinism: \w+", f"determinism: {determinism}", block)
    return front.replace(old_links, links) + f"\n# test kernels\n\n```fkc\n{block}```\n"


OP_OF = {"index_select": OpKind.IndexSelect, "gather": OpKind.Gather, "masked_fill": OpKind.MaskedFill,
         "fft_single": OpKind.Fft}


def _cpu_registry(name: str, kernel: str, impl, entry: str | None = None, **doc) -> Registry:
    """A registry holding one F32 Cpu binding of `kernel` (base entry point `entry`, default the
    kernel's name) that runs `impl`."""
    entry = entry or kernel
    computes = op_signature(OP_OF[kernel])  # the stand-in declares what the kernel it replaces computes
    ref = KernelRef(f"{name}::{entry}", Backend.Cpu, impl, code=lambda: name.encode(), signature=computes)
    register_link_registry(name, lambda: {f"{name}::{entry}_f32": ref})
    registry = Registry()
    registry.load(_document(CONTRACTS_DIR / "cpu.md", kernel, name, **doc))
    return registry


def _finite_flip(out: np.ndarray, at: int = 0) -> np.ndarray:
    """`out` with the lowest bit of element `at` flipped where that element is finite (1 ULP)."""
    flat = out.reshape(-1)
    if flat.size > at and np.isfinite(flat[at]):
        flat.view(np.uint32)[at] ^= 1
    return out


def flipped_bit(source, indices, **params):
    """index_select, with the lowest bit of the fourth output element flipped."""
    out = kernels.index_select_step(source, indices, **params)
    out.reshape(-1).view(np.uint32)[min(3, out.size - 1)] ^= 1
    return out


def wrong_index(source, indices, *, source_shape, output_shape, dim):
    """gather reading index + 1 (wrapped): a real kernel with an off-by-one."""
    shifted = (np.asarray(indices).astype(np.int64) + 1) % source_shape[dim]
    return kernels.gather_step(source, shifted.astype(np.uint32), source_shape=source_shape,
                               output_shape=output_shape, dim=dim)


_calls = {"n": 0}


def changes_between_runs(data, mask, *, fill_bytes):
    """masked_fill whose first element moves by one ULP on every other call."""
    _calls["n"] += 1
    out = kernels.masked_fill_step(data, mask, fill_bytes=fill_bytes)
    return _finite_flip(out) if _calls["n"] % 2 == 0 else out


def depends_on_size(source, indices, **params):
    """index_select, one ULP off in the first element when more than 20 indices are given."""
    out = kernels.index_select_step(source, indices, **params)
    return _finite_flip(out) if params["n_indices"] > 20 else out


def conjugated(source, **params):
    """fft, conjugated: right magnitudes, mirrored phases."""
    return np.conj(fft.fft_step(source, **params))


def without_norm(source, **params):
    """fft that ignores `norm` (always "backward")."""
    return fft.fft_step(source, **{**params, "norm": "backward"})


def depends_on_batch(source, **params):
    """fft, one ULP off in its first element when it transforms more than one row at once."""
    out = fft.fft_step(source, **params)
    return _finite_flip(out) if source.size > params["length"] else out


def test_every_binding_of_the_default_registry_keeps_its_contract() -> None:
    report = audit(default_registry())
    assert report.ok, report.table()
    audited = [r for r in report.results if not r.skipped]
    assert len(report.results) == len(default_registry().bindings())
    assert {Backend.Cpu, *([Backend.Vulkan] if HAS_VULKAN else [])} <= {r.binding.backend for r in audited}
    assert all(r.cases >= 8 for r in audited)
    ffts = [r for r in audited if r.binding.op_kind in FFT_KINDS]
    assert len(ffts) == 12 * (2 if HAS_OPENCL else 1) and all(r.cases == 12 for r in ffts)
    assert f"{len(audited)} of {len(audited)} binding(s) keep their contract" in report.table()


def test_a_flipped_bit_fails_precision_with_the_element_and_both_values() -> None:
    registry = _cpu_registry("test::audit::flip", "index_select", flipped_bit)
    report = audit(registry, [Backend.Cpu], seed=7)
    (result,) = report.failures
    failure = result.failure
    assert failure.check == "precision"
    assert failure.case == "shape (97,), dim 0, 41 indices, contiguous source"
    m = failure.mismatch
    assert m.index == (3,)
    assert int(m.got_bits, 16) ^ int(m.expected_bits, 16) == 1 and len(m.got_bits) == 10
    assert "bits differ (the contract declares exact results)" in m.why
    table = report.table()
    assert "FAIL (IndexSelect,[F32,U32,F32],Cpu) numpy -> test::audit::flip::index_select_f32" in table
    assert f"element (3,): got {m.got} ({m.got_bits}), expected {m.expected} ({m.expected_bits})" in table


def test_a_wrong_index_fails_precision() -> None:
    report = audit(_cpu_registry("test::audit::index", "gather", wrong_index), [Backend.Cpu], seed=8)
    (result,) = report.failures
    assert result.failure.check == "precision" and result.cases == 1
    m = result.failure.mismatch
    assert m.got_bits != m.expected_bits and len(m.index) == 1


def test_a_result_that_changes_between_runs_fails_determinism() -> None:
    registry = _cpu_registry("test::audit::flaky", "masked_fill", changes_between_runs, max_ulp=1,
                             determinism="run_to_run")
    _calls["n"] = 0
    (result,) = audit(registry, [Backend.Cpu], seed=9).failures
    assert result.failure.check == "determinism run_to_run: repeat"
    assert result.failure.mismatch.index == (0,)
    assert "bits differ from the first run" in str(result.failure)


def test_a_result_that_depends_on_the_chunking_fails_bitwise_determinism() -> None:
    registry = _cpu_registry("test::audit::sized", "index_select", depends_on_size, max_ulp=1)
    (result,) = audit(registry, [Backend.Cpu], seed=10).failures
    assert result.failure.check == "determinism bitwise: chunking"
    assert "run in 3 pieces joined along axis 0" in str(result.failure)
    relaxed = _cpu_registry("test::audit::sized-relaxed", "index_select", depends_on_size, max_ulp=1,
                            determinism="run_to_run")
    assert audit(relaxed, [Backend.Cpu], seed=10).ok  # it only promised run-to-run stability


def test_a_conjugating_fft_fails_with_the_worst_element_of_its_row() -> None:
    registry = _cpu_registry("test::audit::conj", "fft_single", conjugated, "fft")
    report = audit(registry, [Backend.Cpu], seed=12)
    (result,) = report.failures
    failure = result.failure
    assert (failure.check, result.cases) == ("precision", 1)
    assert failure.case == "shape (16,), dim 0, norm backward, contiguous source"
    m = failure.mismatch
    (k,) = m.index
    assert complex(m.got) == complex(m.expected).conjugate() and complex(m.expected).imag != 0
    assert "row (:,) along axis 0: max|got - expected| = " in m.why
    assert "beyond max_relative 1e-05 (normwise per row)" in m.why
    assert "FAIL (Fft,[F32,C64],Cpu) numpy -> test::audit::conj::fft_f32" in report.table()
    assert f"element ({k},): got {m.got} ({m.got_bits}), expected {m.expected}" in report.table()


def test_an_fft_dropping_its_norm_fails_at_the_first_ortho_case() -> None:
    registry = _cpu_registry("test::audit::norm", "fft_single", without_norm, "fft")
    report = audit(registry, [Backend.Cpu], seed=13)
    (result,) = report.failures
    assert result.cases == 2 and result.failure.check == "precision"
    assert result.failure.case == "shape (3, 12), dim 1, norm ortho, contiguous source"
    m = result.failure.mismatch
    assert complex(m.got) / complex(m.expected) == pytest.approx(np.sqrt(12), rel=1e-5)
    assert re.search(r"row \(\d, :\) along axis 1: .* is 2\.46 x max\|expected\|", m.why)
    assert m.index[0] == int(m.why[5]) and len(m.index) == 2


def test_an_fft_declared_bitwise_is_run_in_smaller_batches() -> None:
    registry = _cpu_registry("test::audit::batch", "fft_single", depends_on_batch, "fft")
    (result,) = audit(registry, [Backend.Cpu], seed=14).failures
    assert result.cases == 2 and result.failure.check == "determinism bitwise: chunking"
    assert "run in 3 pieces joined along axis 0" in str(result.failure)
    relaxed = _cpu_registry("test::audit::batch-relaxed", "fft_single", depends_on_batch, "fft",
                            determinism="run_to_run")
    report = audit(relaxed, [Backend.Cpu], seed=14)
    assert report.ok and report.results[0].cases == 12  # run_to_run: repeats only, never split


@pytest.mark.skipif(not HAS_VULKAN, reason="no Vulkan device here")
def test_a_vulkan_binding_dispatching_the_wrong_fill_fails() -> None:
    from lazyfuel.backends.vulkan.fill_kernels import MaskedFillKernel

    class WrongFill(MaskedFillKernel):
        """The real masked_fill shader, recorded with the fill value's lowest bit flipped."""

        def record(self, batch, step, args, out, status):
            fill = bytearray(step.param["fill_bytes"])
            fill[0] ^= 1
            params = tuple((k, bytes(fill) if k == "fill_bytes" else v) for k, v in step.params)
            super().record(batch, dataclasses.replace(step, params=params), args, out, status)

    name = "test::audit::vulkan-fill"
    ref = KernelRef(f"{name}::masked_fill", Backend.Vulkan, WrongFill(), code=lambda: b"wrong fill",
                    signature=op_signature(OpKind.MaskedFill))
    register_link_registry(name, lambda: {f"{name}::masked_fill_f32": ref})
    registry = Registry()
    registry.load(_document(CONTRACTS_DIR / "vulkan_select.md", "masked_fill", name))
    (result,) = audit(registry, [Backend.Vulkan], seed=11).failures
    assert result.binding.backend is Backend.Vulkan and result.failure.check == "precision"
    m = result.failure.mismatch
    assert int(m.got_bits, 16) ^ int(m.expected_bits, 16) == 1


@pytest.mark.skipif(not HAS_VULKAN, reason="no Vulkan device here")
def test_a_binding_accepting_broadcast_masks_is_audited_on_them() -> None:
    """masked_fill_broadcast's mask accepts stride 0, so the audit runs each case again with the
    mask a broadcast of a smaller one; the real shader reading such a mask as if it were dense
    passes every plain case and fails the first broadcast one."""
    from lazyfuel.backends.vulkan.fill_kernels import MaskedFillKernel
    from lazyfuel.backends.vulkan.kernels import DeviceValue
    from lazyfuel.layout import Layout

    class DenseReading(MaskedFillKernel):
        """The real masked_fill shader, told every mask is contiguous."""

        def record(self, batch, step, args, out, status):
            data, mask = args
            dense = DeviceValue(mask.allocation, mask.dtype, Layout.contiguous(mask.layout.shape))
            super().record(batch, step, [data, dense], out, status)

    name = "test::audit::vulkan-broadcast-mask"
    ref = KernelRef(f"{name}::masked_fill_broadcast", Backend.Vulkan, DenseReading(),
                    code=lambda: b"dense reading", signature=op_signature(OpKind.MaskedFill))
    register_link_registry(name, lambda: {f"{name}::masked_fill_broadcast_f32": ref})
    registry = Registry()
    registry.load(_document(CONTRACTS_DIR / "vulkan_broadcast.md", "masked_fill_broadcast", name))
    report = audit(registry, [Backend.Vulkan], seed=5)
    (result,) = report.failures
    plain = len(spec_for(OpKind.MaskedFill).cases)
    assert result.cases == plain + 1 and "mask-row source" in result.failure.case
    correct = Registry()
    correct.load(CONTRACTS_DIR / "vulkan_broadcast.md")
    (ok,) = audit(correct, [Backend.Vulkan], seed=5, select=lambda b: b.op_kind is OpKind.MaskedFill
                  and b.dtypes[0].name == "F32").results
    assert ok.failure is None and ok.cases == 4 * plain  # the plain cases and three mask views of each


def test_audit_cli_prints_the_table_and_exits_1_on_failure(monkeypatch, capsys) -> None:
    assert main(["audit", "--backend", "cpu", "--op", "Contiguize", "--seed", "3"]) == 0
    assert "15 of 15 binding(s) keep their contract" in capsys.readouterr().out
    broken = _cpu_registry("test::audit::cli", "index_select", flipped_bit)
    monkeypatch.setattr(audit_module, "default_registry", lambda: broken)
    assert main(["audit", "--backend", "cpu"]) == 1
    out = capsys.readouterr().out
    assert "FAIL    IndexSelect" in out and "0 of 1 binding(s) keep their contract" in out
