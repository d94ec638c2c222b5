"""The spec registry (`ops.spec`): one spec per op kind, found by kind or name; an unknown kind names
the known ones."""

from __future__ import annotations

import pytest

from lazyfuel.contracts.model import OpKind
from lazyfuel.ops import find, spec_for, specs


def test_every_op_kind_has_exactly_one_spec() -> None:
    assert sorted(s.kind.name for s in specs()) == sorted(k.name for k in OpKind)
    assert all(spec_for(s.kind) is s and spec_for(s.kind.name) is s for s in specs())


def test_an_unknown_op_kind_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown OpKind 'transpose'; expected one of IndexSelect"):
        spec_for("transpose")
    assert find("transpose") is None and find("") is None and find(OpKind.Gather) is spec_for("Gather")
