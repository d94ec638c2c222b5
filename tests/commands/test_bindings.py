"""`lazyfuel judge` and `lazyfuel audit` (`lazyfuel.commands.bindings`): `--op` / `--dtype` keep the
bindings asked for, the judge measures once and then reads its cache (a table row per binding),
the audit prints its table and exits 0 when every binding keeps its contract. Real numpy kernels,
one small binding each (Cpu Contiguize of U8), the cache in a fresh folder."""

from __future__ import annotations

import argparse

import pytest

from lazyfuel.commands.bindings import _select, add_binding_commands
from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.providers import default_registry


def kept(op=None, dtype=None) -> set:
    keep = _select(argparse.Namespace(op=op, dtype=dtype))
    return {b.key for b in default_registry().bindings() if keep(b)}


def test_select_keeps_the_op_kinds_and_data_dtypes_asked_for():
    every = {b.key for b in default_registry().bindings()}
    assert kept() == every
    gathers = kept(op=["Gather"])
    assert gathers and {k.op_kind for k in gathers} == {OpKind.Gather}
    both = kept(op=["Gather", "IndexSelect"], dtype=["F32", "U8"])
    assert both == {b.key for b in default_registry().bindings()
                    if b.op_kind in (OpKind.Gather, OpKind.IndexSelect)
                    and b.dtypes[0] in (DType.F32, DType.U8)}
    assert both and both < gathers | kept(op=["IndexSelect"])
    rfft = kept(op=["Rfft"], dtype=["F32"])  # the data dtype: an F32 rfft's output is C64
    assert rfft and {k.dtypes[-1] for k in rfft} == {DType.C64} and not kept(op=["Rfft"], dtype=["C64"])


def test_an_unknown_op_or_dtype_is_a_value_error_naming_the_accepted_ones():
    with pytest.raises(ValueError, match=r"unknown OpKind 'Flip'; expected one of IndexSelect Gather "):
        kept(op=["Flip"])
    with pytest.raises(ValueError, match=r"unknown dtype 'F31'; expected one of F32 "):
        kept(dtype=["F31"])


def test_judge_and_audit_parse_their_filters(parse):
    judge = parse(add_binding_commands, "judge", "--quick", "--force", "--backend", "CPU", "--op", "Gather",
                  "--op", "Fft", "--dtype", "F32")
    assert (judge.quick, judge.force, judge.backend, judge.op, judge.dtype) == (True, True, "cpu",
                                                                              ["Gather", "Fft"], ["F32"])
    audit = parse(add_binding_commands, "audit", "--seed", "5")
    assert (audit.seed, audit.backend, audit.op, audit.dtype) == (5, None, None, None)
    with pytest.raises(SystemExit):
        parse(add_binding_commands, "audit", "--seed", "five")


def test_judge_measures_a_binding_then_reads_it_from_the_cache(parse, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("LAZYFUEL_CACHE_DIR", str(tmp_path))
    args = parse(add_binding_commands, "judge", "--quick", "--backend", "cpu", "--op", "Contiguize",
                 "--dtype", "U8")
    assert args.func(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["op_kind", "dtype", "key", "backend", "symbol", "latency", "per", "dispatch",
                              "GB/s", "spread", "clock"]
    assert out[1].split()[:4] == ["Contiguize", "[U8,U8]", "Cpu", "lazyfuel::cpu::contiguize_u8"]
    assert out[1].endswith("measured") and out[-1] == f"1 measured, 0 cached; cache {tmp_path / 'judge.json'}"
    assert args.func(args) == 0
    again = capsys.readouterr().out.splitlines()
    assert again[1].endswith("cached") and again[-1].startswith("0 measured, 1 cached;")
    assert Backend.Cpu.name in again[1]


def test_audit_prints_its_table_and_exits_0_when_the_binding_keeps_its_contract(parse, capsys):
    args = parse(add_binding_commands, "audit", "--backend", "cpu", "--op", "Contiguize", "--dtype", "U8",
                 "--seed", "3")
    assert args.func(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:3] == ["result", "op_kind", "dtype"]
    assert out[1].split()[:5] == ["ok", "Contiguize", "[U8,U8]", "Cpu", "numpy"]
    assert out[-1] == "1 of 1 binding(s) keep their contract (0 skipped; seed 3)"
