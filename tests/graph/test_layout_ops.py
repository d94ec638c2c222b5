"""Layout changes (`graph.layout_ops`): broadcasts and transposes that cannot be are refused."""

from __future__ import annotations

import pytest

import lazyfuel as lf

from .small_array import x


def test_broadcast_and_transpose_errors():
    with pytest.raises(ValueError, match=r"cannot broadcast shape \(5, 6\) to \(4, 6\)"):
        lf.broadcast_to(x(), (4, 6))
    with pytest.raises(ValueError, match=r"axes \(0, 0\) are not a permutation"):
        lf.transpose(x(), (0, 0))
