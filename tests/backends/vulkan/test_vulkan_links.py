"""The Vulkan link registries and contract document: symbols, KernelRef identity, bindings."""

from __future__ import annotations

from vulkan_helpers import SEED, VULKAN_MD

from lazyfuel.backends.base import executor
from lazyfuel.backends.vulkan import register
from lazyfuel.backends.vulkan.executor import VulkanExecutor
from lazyfuel.backends.vulkan.links import fuel_vulkan_entry_points, lazyfuel_entry_points
from lazyfuel.contracts import format_text, parse_contracts
from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.registry import Registry
from lazyfuel.registry.links import link_registry

FUEL = "fuel_vulkan_backend::fkc::"


def test_seed_symbols_resolve_as_the_seed_says():
    table = fuel_vulkan_entry_points()
    index_select = [table[f"{FUEL}index_select_{s}"] for s in ("f32", "f16", "bf16", "f64")]
    assert len({id(r) for r in index_select}) == 4
    suffixes = ("f32", "f16", "bf16", "f64", "u8", "u32")
    assert len({id(table[f"{FUEL}gather_{s}"]) for s in suffixes}) == 1
    assert len({id(table[f"{FUEL}masked_fill_{s}"]) for s in suffixes}) == 1
    assert len(table) == 16
    assert all(r.backend is Backend.Vulkan for r in table.values())
    assert fuel_vulkan_entry_points() is table  # same KernelRefs every time


def test_kernel_code_is_the_spirv():
    ref = fuel_vulkan_entry_points()[f"{FUEL}gather_f32"]
    code = ref.code()
    assert code[:4] == b"\x03\x02\x23\x07" and len(code) > 1000


def test_register_makes_both_registries_and_the_executor_known():
    register()
    assert link_registry(f"{FUEL}ENTRY_POINTS") is not None
    assert set(link_registry("lazyfuel::vulkan::ENTRY_POINTS")) == set(lazyfuel_entry_points())
    assert isinstance(executor(Backend.Vulkan), VulkanExecutor)


def test_seed_imports_as_it_is():
    register()
    registry = Registry()
    bindings = registry.load(SEED)
    assert len(bindings) == 16
    keys = {(b.op_kind, b.dtypes) for b in bindings}
    assert (OpKind.MaskedFill, (DType.BF16, DType.BOOL, DType.BF16)) in keys
    assert (OpKind.IndexSelect, (DType.F64, DType.U32, DType.F64)) in keys


def test_own_document_parses_is_canonical_and_links():
    register()
    text = VULKAN_MD.read_text(encoding="utf-8")
    assert format_text(text, str(VULKAN_MD)) == text
    contracts = parse_contracts(VULKAN_MD)
    assert [c.kernel for c in contracts] == ["contiguize", "index_select", "gather", "masked_fill",
                                             "select_fill"]
    registry = Registry()
    registry.load(SEED)
    bindings = registry.load(VULKAN_MD)
    assert len(bindings) == 59
    contiguize = [b for b in bindings if b.op_kind is OpKind.Contiguize]
    assert {b.dtypes[0] for b in contiguize} == set(DType)
    assert all(b.kernel_source == "lazyfuel-glsl" for b in bindings)
