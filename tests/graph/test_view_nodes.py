"""View nodes (`graph.view_nodes`): transposes, slices and broadcasts keep their chunks aligned with
the source."""

from __future__ import annotations

import lazyfuel as lf

from .small_array import x


def test_views_keep_chunks_aligned_with_the_source():
    y = x()
    assert y.T.chunks == ((4, 2), (2, 2, 1))
    assert y[::-1].chunks == ((1, 2, 2), (4, 2))
    assert y[1::2, 5].chunks == ((1, 1),)
    assert y[..., ::3].shape == (5, 2)
    assert lf.broadcast_to(y, (3, 5, 6)).chunks == ((3,), (2, 2, 1), (4, 2))
