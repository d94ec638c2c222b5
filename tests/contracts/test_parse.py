"""The importer: the reference document imports as it is, every field as the document says."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from lazyfuel.contracts import (
    Acceptance,
    AwkwardLayoutStrategy,
    Backend,
    ContractError,
    Determinism,
    DtypeRule,
    FastPath,
    FieldSpec,
    KernelContract,
    LayoutCaps,
    OpKind,
    Provenance,
    Requirement,
    ShapeRule,
    format_text,
    parse_contracts,
    parse_document,
    parse_file,
)
from lazyfuel.dtypes import DType

from .conftest import SHIPPED

F32, F16, BF16, F64, U8, U32, BOOL = (DType[n] for n in ("F32", "F16", "BF16", "F64", "U8", "U32", "BOOL"))
CONTIGUOUS_ONLY = LayoutCaps(Requirement.required, Acceptance.rejected, Acceptance.rejected,
                             Acceptance.rejected, Acceptance.rejected)
ALL_SIX = (F32, F16, BF16, F64, U8, U32)


def _common(c: KernelContract) -> None:
    """What the three seed kernels share, field by field."""
    assert c.backend is Backend.Vulkan
    assert c.kernel_source == "vulkan-slang"
    assert c.kernel_revision_hash is None  # `auto`
    assert len(c.outputs) == 1
    out = c.outputs[0]
    assert out.name == "out"
    assert out.layout_guarantee == "contiguous"
    assert out.aliasing == "none"
    assert c.caps.awkward_layout_strategy is AwkwardLayoutStrategy.requires_contiguous
    assert c.caps.fast_paths == (FastPath(when="all_inputs_contiguous", cls="cheap_elementwise"),)
    assert c.caps.in_place is False
    assert c.caps.alignment_bytes == 16
    assert c.caps.access_granularity_bits == 32
    assert c.cost.provenance is Provenance.judge_measured
    assert c.cost.cls == "cheap_elementwise"
    assert c.cost.flops.text == "0"
    assert c.cost.flops.names == frozenset()
    p = c.precision
    assert (p.bit_stable_on_same_hardware, p.max_ulp, p.max_relative, p.max_absolute, p.audited) == (
        True, 0.0, 0.0, 0.0, True)
    assert c.determinism is Determinism.bitwise
    for spec in c.inputs:
        assert spec.layout == CONTIGUOUS_ONLY


def test_seed_imports_as_it_is_into_three_contracts(seed_text: str, seed_path: Path) -> None:
    doc = parse_document(seed_text, str(seed_path))
    assert [c.kernel for c in doc.contracts] == ["index_select", "gather", "masked_fill"]
    provider = doc.provider
    assert provider.name == "fuel-vulkan-kernels"
    assert provider.backend is Backend.Vulkan
    assert provider.kernel_source == "vulkan-slang"
    assert provider.link_registry == "fuel_vulkan_backend::fkc::ENTRY_POINTS"
    assert provider.revision_base == "git:f41137b4"
    assert provider.fkc_version == 1
    assert (provider.loc.path, provider.loc.line, provider.loc.key) == (str(seed_path), 3, "provider")
    assert all(c.provider == provider for c in doc.contracts)
    assert doc.path == str(seed_path)
    assert doc.prose.startswith(
        "# fuel-vulkan-kernels — select / gather / masked-fill family kernel contracts\n")
    assert "```fkc" not in doc.prose and "kernel: gather" not in doc.prose
    assert "## gather (N-D gather along a dim" in doc.prose
    assert len(doc.prose_parts) == 4 and "".join(doc.prose_parts) == doc.prose


def test_seed_index_select(seed_text: str) -> None:
    c = parse_document(seed_text, "seed.txt").contracts[0]
    _common(c)
    assert c.kernel == "index_select"
    assert c.op_kind is OpKind.IndexSelect
    assert c.blurb == ("Row-wise lookup along a dim by a rank-1 U32 index tensor; f32/f16/bf16/f64 byte "
                       "copy; contiguous-only binding.")
    assert c.entry_point == "fuel_vulkan_backend::fkc::index_select"
    source, indices = c.inputs
    assert (source.name, source.dtypes, source.rank) == ("source", (F32, F16, BF16, F64), None)
    assert source.shape_constraint == "flat [outer_count, source_dim_size, inner_count]"
    assert (indices.name, indices.dtypes, indices.rank) == ("indices", (U32,), 1)
    assert indices.shape_constraint == "length n_indices; index value is the selected-axis coordinate"
    assert c.fanned_input is source
    assert c.op_params.variant == "IndexSelect"
    assert c.op_params.fields == (
        FieldSpec("outer_count", "usize", "product of dims before the selected axis"),
        FieldSpec("source_dim_size", "usize", "size of the selected source axis"),
        FieldSpec("n_indices", "usize", "number of indices == output selected-dim size"),
        FieldSpec("inner_count", "usize", "product of dims after the selected axis"),
    )
    assert c.outputs[0].dtype_rule == DtypeRule("source")
    assert c.outputs[0].shape_rule == ShapeRule("from_params", ("outer_count", "n_indices", "inner_count"))
    assert c.cost.bytes_moved.text == "2 * outer_count * n_indices * inner_count * dtype_bytes"
    env = {"outer_count": 2, "n_indices": 3, "inner_count": 5, "dtype_bytes": 4}
    assert c.cost.bytes_moved.evaluate(env) == 240.0
    assert c.precision.notes == ("exact byte-for-byte copy of selected slices; no arithmetic, bit-identical "
                                 "across any hardware.")
    assert (c.loc.path, c.loc.line, c.loc.key) == ("seed.txt", 60, "kernel")
    assert [(i.loc.line, i.loc.key) for i in c.inputs] == [(69, "inputs"), (74, "inputs")]
    assert c.doc.startswith("## index_select (row-wise lookup along a dim by a rank-1 U32 index tensor;")
    assert c.doc.endswith("Dispatch key `(IndexSelect, [T, U32, T], Vulkan)`.")
    assert "```" not in c.doc and "---" not in c.doc


def test_seed_gather(seed_text: str) -> None:
    c = parse_document(seed_text, "seed.txt").contracts[1]
    _common(c)
    assert c.kernel == "gather"
    assert c.op_kind is OpKind.Gather
    assert c.blurb == ("N-D gather along a dim by a same-shape U32 index tensor; dtype-agnostic byte-width "
                       "word move; contiguous-only binding.")
    assert c.entry_point == "fuel_vulkan_backend::fkc::gather"
    source, indices = c.inputs
    assert (source.name, source.dtypes, source.rank) == ("source", ALL_SIX, None)
    assert source.shape_constraint == "row-major source extents; rank <= 8"
    assert (indices.name, indices.dtypes, indices.rank) == ("indices", (U32,), None)
    assert indices.shape_constraint == "indices.shape == out_shape; agrees with source on every axis != dim"
    assert c.op_params.variant == "Gather"
    assert c.op_params.fields == (
        FieldSpec("source_shape", "Vec<usize>", "row-major source extents; rank <= 8"),
        FieldSpec("output_shape", "Vec<usize>", "== indices.shape; agrees with source on every axis != dim"),
        FieldSpec("dim", "usize", "gathered axis", "< source_shape.len()"),
    )
    assert c.outputs[0].dtype_rule == DtypeRule("source")
    assert c.outputs[0].shape_rule == ShapeRule("from_params", ("output_shape",))
    assert c.cost.bytes_moved.text == "2 * n * dtype_bytes"
    assert c.cost.bytes_moved.evaluate({"n": [2, 3], "dtype_bytes": 2}) == 24.0
    assert c.precision.notes == ("exact byte-width gather copy; no arithmetic, bit-identical across any "
                                 "hardware. No bounds clamp on indices (caller pre-validates).")
    assert c.loc.line == 125
    assert c.doc.startswith("## gather (N-D gather")
    assert c.doc.endswith("Dispatch key `(Gather, [T, U32, T], Vulkan)`.")


def test_seed_masked_fill(seed_text: str) -> None:
    c = parse_document(seed_text, "seed.txt").contracts[2]
    _common(c)
    assert c.kernel == "masked_fill"
    assert c.op_kind is OpKind.MaskedFill
    assert c.blurb == ("Per-element select data-vs-constant by a Bool mask; dtype-agnostic byte-width copy; "
                       "contiguous-only binding.")
    assert c.entry_point == "fuel_vulkan_backend::fkc::masked_fill"
    data, mask = c.inputs
    assert (data.name, data.dtypes, data.rank) == ("data", ALL_SIX, None)
    assert data.shape_constraint == "same shape as out"
    assert (mask.name, mask.dtypes, mask.rank) == ("mask", (BOOL,), None)
    assert mask.shape_constraint == "same element count as data; mask != 0 selects the constant fill"
    assert c.op_params.variant == "MaskedFill"
    assert c.op_params.fields == (
        FieldSpec("fill_bytes", "Vec<u8>", "the constant fill value, dtype-width bytes"),)
    assert c.outputs[0].dtype_rule == DtypeRule("data")
    assert c.outputs[0].shape_rule == ShapeRule("same_as", ("data",))
    assert c.cost.bytes_moved.text == "3 * n * dtype_bytes"
    assert c.cost.bytes_moved.names == frozenset({"n", "dtype_bytes"})
    assert c.precision.notes == ("exact per-element byte select (data vs constant fill by Bool mask); no "
                                 "arithmetic, bit-identical across any hardware.")
    assert c.loc.line == 190
    assert c.doc.endswith("`(MaskedFill, [T, BOOL, T], Vulkan)` (GAP-168(c)).")


def test_seed_fans_into_sixteen_dtype_keys(seed_text: str) -> None:
    contracts = parse_contracts(seed_text)
    assert sum(len(c.fanned_input.dtypes) for c in contracts) == 16


def test_parse_contracts_reads_paths_and_text(seed_path: Path, seed_text: str) -> None:
    from_text = parse_contracts(seed_text)
    assert parse_contracts(seed_path) == from_text
    assert parse_contracts(str(seed_path)) == from_text
    assert parse_file(seed_path).contracts == tuple(from_text)
    assert parse_contracts(seed_path)[0].loc.path == str(seed_path)


def test_parse_contracts_refuses_a_missing_file() -> None:
    with pytest.raises(FileNotFoundError):
        parse_contracts(Path("/nonexistent/kernels.md"))
    with pytest.raises(ContractError, match="neither an existing file nor FKC document text"):
        parse_contracts("/nonexistent/kernels.md")


def test_indented_and_flattened_forms_give_equal_contracts(seed_text: str) -> None:
    assert parse_contracts(format_text(seed_text)) == parse_contracts(seed_text)


def test_newline_styles_and_bom_do_not_matter(seed_text: str) -> None:
    expected = parse_contracts(seed_text)
    assert parse_contracts(seed_text.replace("\n", "\r\n")) == expected
    assert parse_contracts("\ufeff" + seed_text) == expected
    doc = parse_document(seed_text.replace("\n", "\r\n"))
    assert doc.contracts[2].loc.line == 190


def test_explicit_revision_hash(small_text: str) -> None:
    for written, expected in [('"00FFab"', "00ffab"), ("deadbeef", "deadbeef"), ("12345678", "12345678")]:
        text = small_text.replace("kernel_revision_hash: auto", f"kernel_revision_hash: {written}")
        assert parse_contracts(text)[0].kernel_revision_hash == expected


def test_kernel_names_are_one_word(small_text: str) -> None:
    renamed = parse_contracts(small_text.replace("kernel: gather", "kernel: gather-v2.1"))
    assert renamed[0].kernel == "gather-v2.1"
    with pytest.raises(ContractError, match="kernel name 'two words' must be one word") as info:
        parse_contracts(small_text.replace("kernel: gather", "kernel: two words"))
    assert (info.value.line, info.value.key) == (15, "kernel")
    with pytest.raises(ContractError, match=r"kernel name 'gather\\n' must be one word"):
        parse_contracts(small_text.replace("kernel: gather", 'kernel: "gather\\n"'))


def test_optional_keys_may_be_left_out(small_text: str) -> None:
    text = small_text.replace('shape_constraint: "row-major"\n', "").replace('notes: "exact"\n', "")
    c = parse_contracts(text)[0]
    assert c.inputs[0].shape_constraint == ""
    assert c.precision.notes == ""
    assert c.op_params.fields[1] == FieldSpec("output_shape", "Vec<usize>")


def test_empty_lists_and_fields(small_text: str) -> None:
    text = small_text.replace('- { when: "all_inputs_contiguous", class: cheap_elementwise }\n', "").replace(
        "fast_paths:\n", "fast_paths: []\n")
    assert parse_contracts(text)[0].caps.fast_paths == ()


def test_an_fkc_fence_inside_other_code_is_prose(small_text: str) -> None:
    sample = "````markdown\n```fkc\nkernel: not_a_kernel\n```\n````\n"
    text = small_text.replace("A gather.\n", "A gather.\n" + sample)
    doc = parse_document(text)
    assert [c.kernel for c in doc.contracts] == ["gather"]
    assert "not_a_kernel" in doc.contracts[0].doc


def test_kernel_without_a_section_has_no_doc(small_text: str) -> None:
    text = small_text.replace("## gather (test)\n", "")
    assert parse_contracts(text)[0].doc == ""


def test_two_kernels_in_one_document_each_get_their_section(small_text: str) -> None:
    block = small_text[small_text.index("```fkc"):]
    second = block.replace("kernel: gather", "kernel: gather_again")
    doc = parse_document(small_text + "---\n## gather_again (second)\nAgain.\n" + second)
    assert [c.kernel for c in doc.contracts] == ["gather", "gather_again"]
    assert doc.contracts[0].doc == "## gather (test)\nA gather."
    assert doc.contracts[1].doc == "## gather_again (second)\nAgain."
    assert doc.contracts[1].loc.line == 71


def test_oversized_document_is_refused_quickly(small_text: str) -> None:
    text = small_text + "x" * (4 * 1024 * 1024)
    start = time.perf_counter()
    with pytest.raises(ContractError, match="at most 4194304 are accepted"):
        parse_document(text)
    assert time.perf_counter() - start < 10.0  # catches blow-ups, not speed


def test_non_text_is_refused() -> None:
    with pytest.raises(ContractError, match="a contract document is text"):
        parse_document(b"---\n")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        parse_contracts(42)  # type: ignore[arg-type]


def test_non_utf8_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "latin1.md"
    path.write_bytes(b"---\nfkc_version: 1\n\xe9\n")
    with pytest.raises(ContractError, match="not UTF-8 text") as info:
        parse_contracts(path)
    assert info.value.path == str(path)


def test_error_string_names_file_line_and_key(small_text: str) -> None:
    with pytest.raises(ContractError) as info:
        parse_document(small_text.replace("dtypes: [F32, F16]", "dtypes: [F32, F31]"), "kernels.md")
    assert str(info.value).startswith(
        "kernels.md:25: dtypes: unknown dtype 'F31'; expected one of F32 F16 BF16")


def test_shipped_documents_parse() -> None:
    for path in SHIPPED:
        assert parse_contracts(path), path
