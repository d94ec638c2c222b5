"""`lazyfuel.registry.signature`: what a kernel computes, matched against a contract. Each
mismatch (op kind, input names, dtypes read, outputs, dtype rule) is named; a signature can be
widened to read more dtypes at one input. Real contracts of the shipped documents."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import lazyfuel
from lazyfuel.contracts import parse_contracts
from lazyfuel.contracts.model import DtypeRule, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.registry.signature import OP_SIGNATURES, KernelSignature, op_signature

CONTRACTS = Path(lazyfuel.__file__).parent / "contracts"
CPU = {c.kernel: c for c in parse_contracts(CONTRACTS / "cpu.md")}


def test_every_op_kind_has_its_signature_named_by_kind_or_text():
    assert set(OP_SIGNATURES) == set(OpKind)
    assert op_signature("Gather") is op_signature(OpKind.Gather) is OP_SIGNATURES[OpKind.Gather]
    with pytest.raises(ValueError, match="unknown OpKind 'Roll'"):
        op_signature("Roll")


def test_it_prints_as_a_call():
    assert str(op_signature(OpKind.MaskedFill)) == "MaskedFill(data, mask: BOOL) -> passthrough(data)"
    wide = op_signature(OpKind.Gather).reading("indices", frozenset({DType.U32, DType.I64}))
    assert str(wide) == "Gather(source, indices: I64/U32) -> passthrough(source)"
    assert str(op_signature(OpKind.Irfft)) == "Irfft(source) -> real_of(source)"


def test_the_shipped_cpu_contracts_fit_their_ops_signatures():
    for c in CPU.values():
        sig = op_signature(c.op_kind)
        if c.kernel.endswith("_wide"):  # the wide selects read 64-bit indices too
            read = frozenset(d for i in c.inputs if i.name == "indices" for d in i.dtypes)
            sig = sig.reading("indices", read)
        assert sig.mismatch(c) is None, c.kernel


def test_each_kind_of_mismatch_is_named():
    gather, fft = CPU["gather"], CPU["fft_single"]
    select = op_signature(OpKind.IndexSelect)
    assert select.mismatch(gather) == "the kernel computes IndexSelect, the contract declares op_kind Gather"
    renamed = replace(gather, inputs=(gather.inputs[0], replace(gather.inputs[1], name="idx")))
    assert op_signature(OpKind.Gather).mismatch(renamed) == (
        "the kernel takes inputs (source, indices), the contract declares (source, idx)")
    narrow = KernelSignature(OpKind.Gather, (("source", frozenset({DType.F32})), ("indices", None)),
                             DtypeRule("source"))
    extra = " ".join(d.name for d in gather.inputs[0].dtypes if d is not DType.F32)
    assert narrow.mismatch(gather) == ("the kernel reads source as F32, the contract declares source "
                                       f"dtypes {extra}")
    two = replace(gather, outputs=gather.outputs * 2)
    assert op_signature(OpKind.Gather).mismatch(two) == "the kernel has one output, the contract declares 2"
    inverse = op_signature(OpKind.Irfft)
    as_fft = replace(inverse, op_kind=OpKind.Fft)
    assert as_fft.mismatch(fft) == ("the kernel's output is real_of(source), the contract declares "
                                    f"dtype_rule {fft.outputs[0].dtype_rule}")


def test_reading_an_input_that_is_not_there_is_a_key_error_naming_the_signature():
    with pytest.raises(KeyError, match=r"Contiguize\(source\) -> passthrough\(source\) has no input 'ind"):
        op_signature(OpKind.Contiguize).reading("indices", frozenset({DType.U32}))
