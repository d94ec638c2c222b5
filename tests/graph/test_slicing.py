"""Basic indexing (`graph.slicing`): what may not be indexed is refused with its reason."""

from __future__ import annotations

import pytest

from .small_array import x


def test_basic_indexing_errors():
    with pytest.raises(IndexError, match="too many indices: 3 for an array of 2 dims"):
        x()[0, 0, 0]
    with pytest.raises(IndexError, match="index 5 is out of bounds for an axis of size 5"):
        x()[5]
    with pytest.raises(TypeError, match="use index_select or gather"):
        x()[[0, 1]]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        x()[::0]
