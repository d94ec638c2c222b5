"""Output dtype rules: passthrough / complex_of / real_of, parsed, checked, formatted and fanned."""

from __future__ import annotations

from pathlib import Path

import pytest

import lazyfuel.backends.cpu as cpu
from lazyfuel.contracts import parse_document
from lazyfuel.contracts.fmt import format_text
from lazyfuel.contracts.model import DTYPE_RULES, ContractError, DtypeRule, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.registry import Registry

CPU_MD = Path(cpu.__file__).parents[2] / "contracts" / "cpu.md"
TEXT = CPU_MD.read_text(encoding="utf-8")


def _line_of(text: str, needle: str, after: str) -> int:
    start = text.index(after)
    return text[:text.index(needle, start)].count("\n") + 1


def test_rules_compute_the_output_dtype() -> None:
    assert DtypeRule("x").apply(DType.BF16) is DType.BF16
    assert DtypeRule("x", "complex_of").apply(DType.F32) is DType.C64
    assert DtypeRule("x", "complex_of").apply(DType.F64) is DType.C128
    assert DtypeRule("x", "complex_of").apply(DType.C64) is DType.C64
    assert DtypeRule("x", "real_of").apply(DType.C128) is DType.F64
    assert str(DtypeRule("src", "real_of")) == "real_of(src)"
    assert DtypeRule("src") == DtypeRule("src", "passthrough")
    assert set(DTYPE_RULES) == {"passthrough", "complex_of", "real_of"}


def test_a_rule_without_a_result_names_the_dtypes_it_maps() -> None:
    with pytest.raises(ValueError, match=r"complex_of\(x\) has no result for x of dtype U8; "
                                         r"complex_of maps F32 F64 C64 C128"):
        DtypeRule("x", "complex_of").apply(DType.U8)


def test_fanned_keys_carry_the_computed_output_dtype() -> None:
    cpu.register()
    keys = {(b.op_kind, b.dtypes) for b in Registry().load(CPU_MD)}
    assert (OpKind.Rfft, (DType.F32, DType.C64)) in keys
    assert (OpKind.Rfft, (DType.F64, DType.C128)) in keys
    assert (OpKind.Irfft, (DType.C64, DType.F32)) in keys
    assert (OpKind.Irfft, (DType.C128, DType.F64)) in keys
    assert (OpKind.Fft, (DType.F32, DType.C64)) in keys and (OpKind.Fft, (DType.C64, DType.C64)) in keys


def test_a_rule_undefined_for_a_listed_dtype_is_refused_at_its_line() -> None:
    bad = TEXT.replace("dtype_rule: passthrough(source)", "dtype_rule: complex_of(source)", 1)
    line = _line_of(bad, "dtype_rule: complex_of(source)", "kernel: index_select")
    with pytest.raises(ContractError) as err:
        parse_document(bad, "cpu.md")
    assert (err.value.path, err.value.line, err.value.key) == ("cpu.md", line, "dtype_rule")
    assert err.value.reason == ("complex_of(source) has no result for source of dtype F16; "
                                "complex_of maps F32 F64 C64 C128")


def test_an_unknown_rule_lists_the_rules() -> None:
    bad = TEXT.replace("dtype_rule: complex_of(source)", "dtype_rule: widen(source)", 1)
    with pytest.raises(ContractError) as err:
        parse_document(bad, "cpu.md")
    assert err.value.key == "dtype_rule"
    assert "expected passthrough(…) or complex_of(…) or real_of(…)" in str(err.value)


def test_rules_round_trip_through_fmt() -> None:
    again = parse_document(format_text(TEXT, "cpu.md"), "cpu.md")
    assert again.contracts == parse_document(TEXT, "cpu.md").contracts
    rules = {str(c.outputs[0].dtype_rule) for c in again.contracts}
    assert {"passthrough(source)", "passthrough(data)", "complex_of(source)", "real_of(source)"} <= rules
