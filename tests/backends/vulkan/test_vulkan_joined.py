"""Row ranges joined into one resident block (`backends.vulkan.joined`) on the real pool: resident
blocks of the pool and numpy arrays alike, bit-exact against numpy's concatenate on fresh random
data; parts whose rows are not contiguous bytes are left to the host (None)."""

from __future__ import annotations

import numpy as np

from lazyfuel.backends.vulkan.joined import joined
from lazyfuel.backends.vulkan.residency import ResidentBlock


def test_ranges_of_resident_blocks_and_arrays_join_bit_exact(pool) -> None:
    rng = np.random.default_rng(31)
    a, b, c = (np.ascontiguousarray(rng.standard_normal((n, 7)).astype(np.float32)) for n in (4, 6, 3))
    ra, rb = ResidentBlock.upload(pool, a), ResidentBlock.upload(pool, b)
    whole = joined(pool, [(ra, 1, 4), (c, 0, 3), (rb, 2, 2), (rb, 0, 5)], axis=0)
    try:
        assert isinstance(whole, ResidentBlock) and whole.shape == (11, 7) and whole.pool is pool
        want = np.concatenate([a[1:4], c, b[0:5]])
        assert np.asarray(whole).tobytes() == want.tobytes()
    finally:
        for block in (whole, ra, rb):
            block.free()


def test_a_later_axis_joins_where_the_axes_before_it_are_1_and_not_otherwise(pool) -> None:
    rng = np.random.default_rng(32)
    a, b = (rng.standard_normal((1, n, 4)).astype(np.float64) for n in (3, 5))
    whole = joined(pool, [(a, 0, 3), (b, 1, 5)], axis=1)
    try:
        assert np.asarray(whole).tobytes() == np.concatenate([a, b[:, 1:]], axis=1).tobytes()
    finally:
        whole.free()
    two = rng.standard_normal((2, 3, 4))
    assert joined(pool, [(two, 0, 3), (two, 0, 1)], axis=1) is None
