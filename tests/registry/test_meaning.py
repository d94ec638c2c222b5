"""Contracts cannot change the meaning of an op (issue 16, case 6).

A loaded binding links only to a kernel that declares it computes the binding's op kind with the
binding's inputs and dtype rule; negative, infinite or NaN costs are refused at load; a loaded
document never competes with a default binding; every binding says where it came from; a
document file is refused by its size before it is read.
"""

from __future__ import annotations

import re
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel.cli import main
from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.contracts.parse import MAX_BYTES
from lazyfuel.providers import CONTRACTS_DIR
from lazyfuel.registry import KernelRef, register_link_registry
from lazyfuel.registry.signature import op_signature

CPU_MD = CONTRACTS_DIR / "cpu.md"


def _one_kernel(kernel: str, kernel_source: str = "user-numpy", **edits: str) -> str:
    """cpu.md's front matter and its `kernel` block alone, with a new kernel_source and each text
    edit of the block (keyword: any label; value "old=>new")."""
    text = CPU_MD.read_text(encoding="utf-8")
    tag = f"kernel_source: {kernel_source}"
    front = text[: text.index("\n---\n", 4) + 5].replace("kernel_source: numpy", tag)
    block = next(b for b in re.findall(r"```fkc\n(.*?)```", text, re.S) if f"kernel: {kernel}\n" in b)
    block = block.replace("kernel_source: numpy", tag)
    for edit in edits.values():
        old, new = edit.split("=>")
        assert old in block, old
        block = block.replace(old, new)
    return f"{front}\n## {kernel}\n```fkc\n{block}```\n"


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def _fft_is_the_forward_transform() -> None:
    a = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_allclose(lf.fft(a).compute(), np.fft.fft(a), rtol=1e-5, atol=1e-5)


def test_an_fft_binding_linked_to_the_inverse_kernel_is_refused(tmp_path: Path) -> None:
    doc = _one_kernel("fft_single", entry='"lazyfuel::cpu::fft"=>"lazyfuel::cpu::ifft"')
    path = tmp_path / "evil.md"
    path.write_text(doc, encoding="utf-8")
    before = len(lf.registry())
    with pytest.raises(lf.ContractError) as err:
        lf.load_contracts(path)
    e = err.value
    assert (e.path, e.line, e.key) == (str(path), _line_of(doc, "entry_point:"), "entry_point")
    assert "binding (Fft,[F32,C64],Cpu) user-numpy of kernel 'fft_single'" in str(e)
    assert "links 'lazyfuel::cpu::ifft_f32' to kernel lazyfuel::cpu::ifft" in str(e)
    assert "the kernel computes Ifft, the contract declares op_kind Fft" in str(e)
    assert len(lf.registry()) == before
    _fft_is_the_forward_transform()
    with pytest.raises(lf.ContractError, match="kernel computes Ifft"):
        lf.Registry().load(path)  # not even in a registry of its own


def test_an_index_select_binding_linked_to_the_gather_kernel_is_refused() -> None:
    doc = _one_kernel("index_select", entry='"lazyfuel::cpu::index_select"=>"lazyfuel::cpu::gather"')
    with pytest.raises(lf.ContractError, match="the kernel computes Gather, the contract declares "
                                               "op_kind IndexSelect") as err:
        lf.load_contracts(doc)
    assert err.value.key == "entry_point" and "kernel lazyfuel::cpu::gather" in str(err.value)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(lf.index_select(a, 0, np.array([2, 0])).compute(), a[[2, 0]])


@pytest.mark.parametrize("edits, why", [
    ({"rule": "complex_of(source)=>passthrough(source)"},
     "the kernel's output is complex_of(source), the contract declares dtype_rule passthrough(source)"),
    ({"name": "- name: source=>- name: signal", "rule": "complex_of(source)=>complex_of(signal)"},
     "the kernel takes inputs (source), the contract declares (signal)"),
])
def test_a_binding_must_declare_the_kernels_inputs_and_output(edits: dict[str, str], why: str) -> None:
    with pytest.raises(lf.ContractError) as err:
        lf.Registry().load(_one_kernel("fft_single", **edits))
    assert why in str(err.value) and err.value.key == "entry_point"


def test_an_index_select_reading_float_indices_is_refused() -> None:
    doc = _one_kernel("index_select", dt="dtypes: [U32]=>dtypes: [F32]")
    with pytest.raises(lf.ContractError, match="the kernel reads indices as I64/U32, the contract "
                                               "declares indices dtypes F32"):
        lf.Registry().load(doc)


def test_a_kernel_that_declares_nothing_cannot_be_linked() -> None:
    name = "test::meaning::undeclared"
    ref = KernelRef(f"{name}::fft", Backend.Cpu, impl=None, code=lambda: b"")
    register_link_registry(name, lambda: {f"{name}::fft_f32": ref})
    doc = _one_kernel("fft_single", dt="dtypes: [F32, C64]=>dtypes: [F32]",
                      entry='"lazyfuel::cpu::fft"=>"test::meaning::undeclared::fft"')
    doc = doc.replace("lazyfuel::cpu::ENTRY_POINTS", name)
    with pytest.raises(lf.ContractError, match="declares no signature"):
        lf.Registry().load(doc)


@pytest.mark.parametrize("cost, shown", [
    ("-1e300*n", "is -1e+300 at n = 1"),
    ("1e300 * 1e300 * n", "is inf"),
    ("n - 2", "is -1.0 at"),
    ("1 / (n - 1)", "is inf at"),
    ("(1e300 * 1e300 - 1e300 * 1e300) * n", "is not a number"),
    ("shape - 2 * n", "is -"),  # negative only where the names differ
])
def test_costs_that_are_negative_infinite_or_nan_are_refused_at_load(cost: str, shown: str) -> None:
    doc = _one_kernel("fft_single", flops=f'flops: "5 * n * log2_length"=>flops: "{cost}"')
    with pytest.raises(lf.ContractError) as err:
        lf.parse_contracts(doc)
    e = err.value
    assert (e.line, e.key) == (_line_of(doc, "flops:"), "flops")
    assert shown in str(e) and "a cost must be a finite number >= 0 for every size" in str(e)


def test_the_case_six_document_fails_contracts_check(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    doc = _one_kernel("fft_single", entry='"lazyfuel::cpu::fft"=>"lazyfuel::cpu::ifft"',
                      flops='flops: "5 * n * log2_length"=>flops: "-1e300*n"')
    path = tmp_path / "case6.md"
    path.write_text(doc, encoding="utf-8")
    assert main(["contracts", "check", str(path)]) == 1
    assert "flops: cost flops '-1e300*n' is -1e+300" in capsys.readouterr().err


def test_a_loaded_binding_never_competes_with_a_default_one(tmp_path: Path) -> None:
    doc = _one_kernel("index_select", cost='bytes_moved: "2 *=>bytes_moved: "1e-30 * 2 *')
    path = tmp_path / "faster.md"
    path.write_text(doc, encoding="utf-8")
    before = lf.registry().bindings()
    with pytest.raises(lf.ContractError) as err:
        lf.load_contracts(path)
    e = err.value
    assert (e.path, e.line, e.key) == (str(path), _line_of(doc, "kernel: index_select"), "kernel")
    assert "binding (IndexSelect,[F32,U32,F32],Cpu) user-numpy would compete with the default " \
           "binding (IndexSelect,[F32,U32,F32],Cpu) numpy (kernel 'index_select' at " in str(e)
    assert lf.registry().bindings() == before  # all or nothing
    alone = lf.Registry().load(path)  # on its own it is a valid document
    assert alone and all(b.origin == str(path) for b in alone)


def test_a_loaded_document_adds_what_the_defaults_do_not_serve(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture) -> None:
    """A Vulkan Fft (no default binding serves it) loads beside the defaults and says where it
    came from; `contracts list` shows each binding's origin."""
    name = "test::meaning::vulkan-fft"
    ref = KernelRef(f"{name}::fft", Backend.Vulkan, impl=None, code=lambda: b"vk fft",
                    signature=op_signature(OpKind.Fft))
    register_link_registry(name, lambda: {f"{name}::fft_f32": ref})
    doc = _one_kernel("fft_single", "user-vk", dt="dtypes: [F32, C64]=>dtypes: [F32]",
                      backend="backend: Cpu=>backend: Vulkan",
                      entry='"lazyfuel::cpu::fft"=>"test::meaning::vulkan-fft::fft"')
    doc = doc.replace("lazyfuel::cpu::ENTRY_POINTS", name).replace("backend: Cpu", "backend: Vulkan")
    path = tmp_path / "vkfft.md"
    path.write_text(doc, encoding="utf-8")
    scratch = lf.registry().copy()
    (added,) = scratch.load(path)
    assert added.origin == str(path) and not added.is_default
    assert all(b.is_default for b in lf.registry().bindings())
    assert main(["contracts", "list", str(path), str(CPU_MD)]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].split()[-1] == "origin"
    assert rows[1].startswith("Fft") and rows[1].endswith(str(path))
    assert all(r.endswith(" default") for r in rows[2:-1])
    assert len(rows) == 3 + len(lf.Registry().load(CPU_MD))


def test_explain_says_where_each_binding_came_from() -> None:
    text = lf.explain(lf.index_select(np.arange(6, dtype=np.float32), 0, np.array([1])))
    step = next(line for line in text.splitlines() if "s0 = IndexSelect" in line)
    assert step.endswith("from default")


def test_a_huge_document_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "huge.md"
    with open(path, "wb") as handle:
        handle.truncate(400 * 2**20)  # 400 MB, sparse: no disk used
    tracemalloc.start()
    try:
        with pytest.raises(lf.ContractError, match=f"document is {400 * 2**20} bytes long; at most "):
            lf.load_contracts(path, registry=lf.Registry())
        with pytest.raises(lf.ContractError, match="bytes long"):
            lf.load_contracts(str(path))
        with pytest.raises(lf.ContractError, match="bytes long"):
            lf.parse_contracts(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20  # nothing of it was read


def test_a_file_growing_past_the_limit_is_read_only_to_the_limit(tmp_path: Path) -> None:
    """A character device reports size 0: at most MAX_BYTES + 1 bytes of it are read."""
    zero = Path("/dev/zero")
    if not zero.exists():
        pytest.skip("no /dev/zero")
    tracemalloc.start()
    try:
        with pytest.raises(lf.ContractError, match=f"more than {MAX_BYTES} bytes long"):
            lf.Registry().load(zero)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * MAX_BYTES
