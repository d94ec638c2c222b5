"""Registry: fan-out of the seed, linking, revision hashes, duplicates and lookup misses."""

from __future__ import annotations

import itertools

import pytest
from reference_document import SEED

from lazyfuel.contracts import parse_document
from lazyfuel.contracts.model import Backend, ContractError, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.registry import (
    KernelRef,
    NoBindingError,
    Registry,
    register_link_registry,
    revision_hash,
)
from lazyfuel.registry.cost import unknown_cost
from lazyfuel.registry.signature import op_signature

SEED_TEXT = SEED.read_text(encoding="utf-8")
T4 = ("F32", "F16", "BF16", "F64")
T6 = (*T4, "U8", "U32")


def _test_links() -> dict[str, KernelRef]:
    """A link registry standing in for the Vulkan one: per-dtype index_select, one ref each else."""
    base = "fuel_vulkan_backend::fkc::"
    gather = KernelRef("test::gather", Backend.Vulkan, None, lambda: b"gather-code",
                       op_signature(OpKind.Gather))
    fill = KernelRef("test::masked_fill", Backend.Vulkan, None, lambda: b"fill-code",
                     op_signature(OpKind.MaskedFill))
    links = {f"{base}gather_{DType[t].suffix}": gather for t in T6}
    links |= {f"{base}masked_fill_{DType[t].suffix}": fill for t in T6}
    for t in T4:
        s = DType[t].suffix
        links[f"{base}index_select_{s}"] = KernelRef(f"test::index_select_{s}", Backend.Vulkan, None,
                                                     lambda s=s: f"is-{s}".encode(),
                                                     op_signature(OpKind.IndexSelect))
    return links


def _seed_with_registry(name: str) -> str:
    return SEED_TEXT.replace("fuel_vulkan_backend::fkc::ENTRY_POINTS", name, 1)


@pytest.fixture(scope="module")
def seed_registry() -> Registry:
    register_link_registry("test::seed-links", _test_links)
    registry = Registry()
    registry.add_document(parse_document(_seed_with_registry("test::seed-links"), "seed.md"))
    return registry


def test_seed_fans_into_exactly_the_sixteen_keys(seed_registry: Registry) -> None:
    keys = {(b.op_kind.name, tuple(d.name for d in b.dtypes), b.backend.name)
            for b in seed_registry.bindings()}
    expected = {("IndexSelect", (t, "U32", t), "Vulkan") for t in T4}
    expected |= {("Gather", (t, "U32", t), "Vulkan") for t in T6}
    expected |= {("MaskedFill", (t, "BOOL", t), "Vulkan") for t in T6}
    assert keys == expected
    assert len(seed_registry) == 16
    assert {b.kernel_source for b in seed_registry.bindings()} == {"vulkan-slang"}


def test_seed_symbols_and_kernel_refs(seed_registry: Registry) -> None:
    by_op: dict[str, list] = {}
    for b in seed_registry.bindings():
        by_op.setdefault(b.op_kind.name, []).append(b)
    assert len({id(b.kernel_ref) for b in by_op["IndexSelect"]}) == 4
    assert len({id(b.kernel_ref) for b in by_op["Gather"]}) == 1
    assert len({id(b.kernel_ref) for b in by_op["MaskedFill"]}) == 1
    symbols = sorted(b.symbol for b in by_op["IndexSelect"])
    assert symbols == sorted(f"fuel_vulkan_backend::fkc::index_select_{s}"
                             for s in ("f32", "f16", "bf16", "f64"))


def test_real_vulkan_link_registry_links_the_unchanged_seed() -> None:
    from lazyfuel.providers import register_builtin_providers

    register_builtin_providers()
    registry = Registry()
    bindings = registry.load(SEED)
    assert len(bindings) == 16
    refs = {b.op_kind: set() for b in bindings}
    for b in bindings:
        refs[b.op_kind].add(id(b.kernel_ref))
    assert [len(refs[k]) for k in (OpKind.IndexSelect, OpKind.Gather, OpKind.MaskedFill)] == [4, 1, 1]


def test_revision_hash_is_stable_and_follows_code_bytes(seed_registry: Registry) -> None:
    hashes = {b.symbol: b.revision_hash for b in seed_registry.bindings()}
    again = Registry()
    again.add_document(parse_document(_seed_with_registry("test::seed-links"), "seed.md"))
    assert {b.symbol: b.revision_hash for b in again.bindings()} == hashes
    gather = {h for s, h in hashes.items() if "gather" in s}
    index_select = {h for s, h in hashes.items() if "index_select" in s}
    assert len(gather) == 1 and len(index_select) == 4  # per-dtype wrappers have distinct code
    contract = seed_registry.bindings()[0].contract
    assert revision_hash(contract, b"spirv") == revision_hash(contract, b"spirv")
    assert revision_hash(contract, b"spirv") != revision_hash(contract, b"spirv, edited")


def test_cost_sentinel_is_replaced_at_registration(seed_registry: Registry) -> None:
    for b in seed_registry.bindings():
        assert b.cost_fn is not unknown_cost
    b = seed_registry.lookup("Gather", ["F32", "U32", "F32"])
    env = {"source_shape": (4, 4), "output_shape": (4, 2), "dim": 1, "n": 8, "dtype_bytes": 4}
    assert b.cost_fn(env) > 0


def test_duplicate_key_names_both_places(seed_registry: Registry) -> None:
    text = _seed_with_registry("test::seed-links")
    block = text[text.index("kernel: gather"):]
    block = block[:block.index("```")]
    doubled = text + "\n## again\n```fkc\n" + block.replace("kernel: gather", "kernel: gather2") + "```\n"
    with pytest.raises(ContractError) as err:
        Registry().add_document(parse_document(doubled, "dup.md"))
    message = str(err.value)
    assert "duplicate binding (Gather,[F32,U32,F32],Vulkan) vulkan-slang" in message
    assert "gather2" not in message.split("already declared by")[1] and "'gather'" in message
    assert err.value.path == "dup.md" and err.value.key == "kernel"
    assert err.value.line == doubled.splitlines().index("kernel: gather2") + 1


def test_failed_load_adds_nothing(seed_registry: Registry) -> None:
    registry = Registry()
    text = _seed_with_registry("test::seed-links").replace("gather_", "gather_", 1)
    links = _test_links()
    del links["fuel_vulkan_backend::fkc::masked_fill_u32"]
    register_link_registry("test::incomplete-links", lambda: links)
    with pytest.raises(ContractError) as err:
        registry.add_document(parse_document(text.replace("test::seed-links", "test::incomplete-links"),
                                             "partial.md"))
    assert "'fuel_vulkan_backend::fkc::masked_fill_u32' is not in link registry " \
           "'test::incomplete-links'" in str(err.value)
    assert err.value.key == "entry_point"
    assert err.value.line == text.splitlines().index(
        'entry_point: "fuel_vulkan_backend::fkc::masked_fill" # BASE symbol; fans masked_fill_<suffix>, '
        'all → masked_fill::masked_fill') + 1
    assert len(registry) == 0


def test_unknown_link_registry_is_named() -> None:
    with pytest.raises(ContractError) as err:
        Registry().add_document(parse_document(_seed_with_registry("nobody::LINKS"), "x.md"))
    assert "link registry 'nobody::LINKS' is not registered" in str(err.value)
    assert err.value.key == "link_registry" and err.value.line == 7


def test_lookup_hits_and_lists_near_misses(seed_registry: Registry) -> None:
    hit = seed_registry.lookup("IndexSelect", ["BF16", "U32", "BF16"], backend="Vulkan")
    assert hit.symbol.endswith("index_select_bf16")
    with pytest.raises(NoBindingError) as err:
        seed_registry.lookup("IndexSelect", ["U8", "U32", "U8"])
    assert len(err.value.near_misses) == 4
    assert "dtype of source: binding has F32, asked for U8" in str(err.value)
    with pytest.raises(NoBindingError) as err:
        seed_registry.lookup("Gather", ["F32", "U32", "F32"], backend="Cpu")
    assert "backend is Vulkan, not Cpu" in str(err.value)
    with pytest.raises(NoBindingError, match="no kernel has op_kind Fft"):
        seed_registry.lookup("Fft", ["C64", "C64"])


def test_lookup_checks_layouts_and_ranks(seed_registry: Registry) -> None:
    dense = Layout.contiguous((4, 5))
    transposed = Layout((5, 4), (1, 5), 0)
    idx = Layout.contiguous((3,))
    assert seed_registry.lookup("IndexSelect", ["F32", "U32", "F32"], layouts=[dense, idx])
    with pytest.raises(NoBindingError) as err:
        seed_registry.lookup("IndexSelect", ["F32", "U32", "F32"], layouts=[transposed, idx])
    assert "layout of source: contiguous: required (input is strided)" in str(err.value)
    with pytest.raises(NoBindingError, match="rank of indices: expected 1, got 2"):
        seed_registry.lookup("IndexSelect", ["F32", "U32", "F32"],
                             layouts=[dense, Layout.contiguous((3, 1))])


def test_enum_names_are_accepted_everywhere(seed_registry: Registry) -> None:
    a = seed_registry.lookup(OpKind.MaskedFill, [DType.U8, DType.BOOL, DType.U8], Backend.Vulkan)
    b = seed_registry.lookup("MaskedFill", ["U8", "BOOL", "U8"], "Vulkan")
    assert a is b
    with pytest.raises(ValueError, match="unknown dtype 'F31'"):
        seed_registry.lookup("MaskedFill", ["F31", "BOOL", "F31"])


@pytest.mark.parametrize("t", list(itertools.chain(T6)))
def test_every_seed_dtype_key_is_found(seed_registry: Registry, t: str) -> None:
    assert seed_registry.lookup("Gather", [t, "U32", t]).dtypes[0] is DType[t]


def test_of_kind_indexes_every_binding_in_registration_order(seed_registry: Registry) -> None:
    for kind in (OpKind.IndexSelect, OpKind.Gather, OpKind.MaskedFill):
        assert list(seed_registry.of_kind(kind)) == [b for b in seed_registry.bindings() if b.op_kind is kind]
        assert seed_registry.of_kind(kind.name) == seed_registry.of_kind(kind)
    assert seed_registry.of_kind(OpKind.Fft) == () and seed_registry.of_kind("NoSuchOp") == ()


def test_of_kind_follows_loads_and_copies_apart(seed_registry: Registry) -> None:
    registry = Registry()
    assert registry.of_kind(OpKind.Gather) == ()
    registry.add_document(parse_document(_seed_with_registry("test::seed-links"), "seed.md"))
    assert len(registry.of_kind(OpKind.Gather)) == len(T6)
    scratch = registry.copy()
    twin = _seed_with_registry("test::seed-links").replace("vulkan-slang", "vulkan-twin")
    added = scratch.add_document(parse_document(twin, "twin.md"))
    assert added and all(b in scratch.of_kind(b.op_kind) for b in added)
    assert len(scratch.of_kind(OpKind.Gather)) == 2 * len(T6)
    assert len(registry.of_kind(OpKind.Gather)) == len(T6)  # the copy's load leaves the original as it is
