"""`lazyfuel.contracts.model`: errors that say where (file, line, key), names parsed into enum
members with the accepted ones listed, a layout's first broken cap named, and a contract's inputs
and declaration lines looked up. Real contracts of the shipped CPU document."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import lazyfuel
from lazyfuel.contracts import parse_contracts
from lazyfuel.contracts.model import (
    Acceptance,
    Backend,
    ContractError,
    Determinism,
    LayoutCaps,
    Location,
    OpKind,
    Requirement,
)
from lazyfuel.layout import Layout

CPU = Path(lazyfuel.__file__).parent / "contracts" / "cpu.md"


def test_a_contract_error_says_file_line_and_key():
    err = ContractError("unknown dtype 'F31'", "cpu.md", 25, "dtypes")
    assert str(err) == "cpu.md:25: dtypes: unknown dtype 'F31'"
    assert (err.path, err.line, err.key, err.reason) == ("cpu.md", 25, "dtypes", "unknown dtype 'F31'")
    assert str(ContractError("too long", "big.md")) == "big.md: too long" and isinstance(err, ValueError)
    loc = Location("v.md", 7, "kernel")
    assert str(loc) == "v.md:7" and str(loc.error("bad")) == "v.md:7: kernel: bad"
    assert str(loc.error("bad", key="blurb")) == "v.md:7: blurb: bad"


def test_names_parse_into_members_by_name_or_value():
    assert OpKind.parse("Gather") is OpKind.Gather is OpKind.parse(OpKind.Gather)
    assert Backend.parse("OpenCL") is Backend.OpenCL and str(Backend.Cuda) == repr(Backend.Cuda) == "Cuda"
    assert Determinism.parse("run_to_run") is Determinism.run_to_run
    with pytest.raises(ValueError, match=r"^unknown Determinism 'exact'; expected one of bitwise run_to_run "
                                         r"none$"):
        Determinism.parse("exact")
    with pytest.raises(ValueError, match=r"^unknown Backend 3; expected one of Vulkan Cpu OpenCL Cuda$"):
        Backend.parse(3)


def caps(contiguous="optional", **rejected: bool) -> LayoutCaps:
    accept = {k: Acceptance.rejected if rejected.get(k) else Acceptance.accepted
              for k in ("strided", "broadcast_stride0", "start_offset", "reverse_strides")}
    return LayoutCaps(Requirement.parse(contiguous), **accept)


def test_the_first_broken_cap_is_named():
    a = np.zeros((4, 6), np.float32)
    dense, reversed_, bcast = Layout.of(a), Layout.of(a[::-1]), Layout.of(np.broadcast_to(a[0], (3, 6)))
    assert caps("required").violation(dense) is None
    assert caps("required").violation(reversed_) == (
        "contiguous: required (input is start_offset + reverse_strides)")
    assert caps("required").violation(Layout((4, 6), (6, 1), 0)) is None
    assert caps(reverse_strides=True).violation(reversed_) == "reverse_strides: rejected"
    assert caps(start_offset=True, reverse_strides=True).violation(reversed_) == "start_offset: rejected"
    assert caps(broadcast_stride0=True).violation(bcast) == "broadcast_stride0: rejected"
    assert caps(strided=True).violation(Layout.of(a.T)) == "strided: rejected"
    assert caps().violation(Layout.of(a.T[::-1])) is None  # everything accepted


def test_a_contracts_inputs_and_lines_are_looked_up():
    gather = next(c for c in parse_contracts(CPU) if c.kernel == "gather")
    assert gather.input("indices").name == "indices" and gather.fanned_input is gather.input("source")
    with pytest.raises(KeyError):
        gather.input("mask")
    assert gather.loc.path.endswith("cpu.md") and gather.loc_of("op_kind").line > gather.loc.line
    assert gather.loc_of("op_kind").key == "op_kind"
    assert gather.loc_of("no_such_key").line == gather.loc.line
    fixed = replace(gather, inputs=tuple(replace(i, dtypes=i.dtypes[:1]) for i in gather.inputs))
    assert fixed.fanned_input is None
