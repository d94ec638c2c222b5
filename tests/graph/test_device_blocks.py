"""Device blocks put together (`graph.device_blocks`), on the real pool: a piece of a resident block
reads its rows, pieces join on the device into one resident block bit-exact, host parts join on the
host, and the home device is where most of the resident bytes lie."""

from __future__ import annotations

import numpy as np
import pytest

from lazyfuel.contracts.model import Backend
from lazyfuel.graph.device_blocks import DevicePiece, home_device, joined


@pytest.fixture
def resident(vulkan):
    """Resident blocks of fresh random rows on the default pool, freed after the test."""
    from lazyfuel.backends.vulkan import get_pool
    from lazyfuel.backends.vulkan.residency import ResidentBlock

    made = []

    def make(a: np.ndarray):
        made.append(ResidentBlock.upload(get_pool(), a))
        return made[-1]

    yield make
    for block in made:
        block.free()


def test_pieces_of_resident_blocks_join_on_the_device_bit_exact(resident, bits_equal) -> None:
    rng = np.random.default_rng(101)
    a, b = (rng.standard_normal((n, 5)).astype(np.float32) for n in (6, 4))
    ra, rb = resident(a), resident(b)
    piece = DevicePiece(ra, 0, 2, 5)
    assert piece.shape == (3, 5) and piece.dtype == np.float32 and piece.home == ra.home
    bits_equal(np.asarray(piece), a[2:5])
    both = joined([piece, DevicePiece(rb, 0, 0, 4), b[:1]], axis=0)
    assert both.home == ra.home and both.shape == (8, 5)
    bits_equal(np.asarray(both), np.concatenate([a[2:5], b, b[:1]]))
    both.free()
    assert joined([DevicePiece(rb, 0, 0, 4)], axis=0) is rb  # a whole block's piece: the block
    assert home_device([ra, rb, a], Backend.Vulkan) == ra.home[1]
    assert home_device([a, b], Backend.Vulkan) is None


def test_host_parts_join_on_the_host() -> None:
    a, b = np.arange(6).reshape(2, 3), np.arange(3).reshape(1, 3)
    got = joined([a, b], axis=0)
    assert isinstance(got, np.ndarray) and got.tolist() == [[0, 1, 2], [3, 4, 5], [0, 1, 2]]
    assert joined([a], axis=0) is a
