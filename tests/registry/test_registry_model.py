"""`lazyfuel.registry.model`: kernel references are equal only to themselves, binding keys print
as the dispatch key, and a binding answers its key's fields and whether it is a shipped one."""

from __future__ import annotations

from dataclasses import replace

from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.providers import default_registry
from lazyfuel.registry.model import DEFAULT_ORIGIN, BindingKey, KernelRef


def test_a_kernel_ref_is_equal_only_to_itself_and_reads_no_code_until_asked():
    a = KernelRef("lazyfuel::cpu::gather", Backend.Cpu, impl=None)
    b = KernelRef("lazyfuel::cpu::gather", Backend.Cpu, impl=None)
    assert a != b and a == a and len({a, b}) == 2
    assert repr(a) == "KernelRef(lazyfuel::cpu::gather)" and a.code() == b"" and a.signature is None


def test_a_binding_key_prints_as_the_dispatch_key():
    key = BindingKey(OpKind.Gather, (DType.F32, DType.U32, DType.F32), Backend.Vulkan, "vulkan-slang")
    assert str(key) == "(Gather,[F32,U32,F32],Vulkan) vulkan-slang"
    assert key == BindingKey(OpKind.Gather, (DType.F32, DType.U32, DType.F32), Backend.Vulkan, "vulkan-slang")


def test_a_binding_answers_its_keys_fields_and_its_origin():
    binding = next(b for b in default_registry().bindings() if b.symbol == "lazyfuel::cpu::gather_f32")
    assert (binding.op_kind, binding.dtypes, binding.backend, binding.kernel_source) == (
        OpKind.Gather, (DType.F32, DType.U32, DType.F32), Backend.Cpu, "numpy")
    assert str(binding) == "(Gather,[F32,U32,F32],Cpu) numpy -> lazyfuel::cpu::gather_f32"
    assert binding.is_default and binding.origin == DEFAULT_ORIGIN
    loaded = replace(binding, origin="/tmp/mine.md")
    assert not loaded.is_default and loaded == binding  # origin and cost take no part in equality
