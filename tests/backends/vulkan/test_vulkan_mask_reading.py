"""How the fill kernels read a mask (`mask_reading`): the mode and dense runs of each broadcast
layout, and None (contiguize it) for what the shaders cannot walk. The kernels themselves, on the
device: test_vulkan_fill_kernels.py."""

from __future__ import annotations

import numpy as np
import pytest

from lazyfuel.backends.vulkan.mask_reading import (
    DENSE,
    PER_ELEMENT,
    PER_WORD,
    WORDS,
    MaskReading,
    mask_reading,
)
from lazyfuel.layout import Layout


def layout(small: tuple[int, ...], shape: tuple[int, ...]) -> Layout:
    return Layout.of(np.broadcast_to(np.zeros(small, np.bool_), shape))


ROW, COLUMN = {"outer_dense": True}, {"inner_dense": True}


@pytest.mark.parametrize(("small", "shape", "width", "expected"), [
    ((8, 4), (8, 4), 4, MaskReading(DENSE)),
    ((8, 1), (8, 4), 4, MaskReading(PER_WORD, ((4, 8),), **ROW)),  # a row mask over rows of one word
    ((8, 1), (8, 256), 4, MaskReading(PER_WORD, ((256, 8),), **ROW)),  # W3's row mask
    ((8, 1), (8, 6), 4, MaskReading(PER_ELEMENT, ((6, 8),), **ROW)),  # rows of 1.5 words
    ((1, 8), (5, 8), 2, MaskReading(WORDS, ((1, 8),), **COLUMN)),  # a column mask over rows of one word
    ((1, 6), (5, 6), 4, MaskReading(PER_ELEMENT, ((1, 6),), **COLUMN)),
    ((1, 1), (5, 6), 4, MaskReading(PER_ELEMENT)),  # one byte for all: 30 elements, not whole words
    ((1, 1), (5, 8), 8, MaskReading(PER_WORD)),
    ((3, 1, 4), (3, 5, 4), 4, MaskReading(WORDS, ((1, 4), (20, 3)), True, True)),
    ((3, 1, 6), (3, 5, 6), 4, MaskReading(PER_ELEMENT, ((1, 6), (30, 3)), True, True)),
    ((1, 5, 1), (3, 5, 4), 16, MaskReading(PER_WORD, ((4, 5),))),  # broadcast on both ends
    ((3, 5, 1), (3, 5, 4), 16, MaskReading(PER_WORD, ((4, 15),), **ROW)),
    ((5, 1), (2, 5, 16), 1, MaskReading(PER_WORD, ((16, 5),))),  # a lower-rank mask (numpy's rule)
], ids=str)
def test_modes_and_runs(small, shape, width, expected):
    assert mask_reading(layout(small, shape), width) == expected


def test_runs_are_padded_for_the_push_constants():
    reading = MaskReading(PER_WORD, ((4, 8),))
    assert reading.divs == [4, 1, 1, 1] and reading.exts == [8, 1, 1, 1]
    assert reading.spec == (PER_WORD, 1, 0, 0)


def test_what_the_shaders_cannot_walk_is_none():
    m = np.zeros((6, 10), np.bool_)
    assert mask_reading(Layout.of(m.T), 4) is None  # strided
    assert mask_reading(Layout.of(m[::-1]), 4) is None  # reversed: an offset
    assert mask_reading(Layout((4, 4), (8, 1), 0), 4) is None  # rows with gaps
    five_runs = layout((2, 1, 2, 1, 2, 1, 2, 1, 2), (2, 3, 2, 3, 2, 3, 2, 3, 2))
    assert mask_reading(five_runs, 1) is None  # the push constants hold four dense runs
    assert mask_reading(Layout((1 << 20, 1 << 13), (1 << 13, 1), 0), 4) is not None
    assert mask_reading(Layout((1 << 20, 2, 1 << 12), (1 << 12, 0, 1), 0), 4) is None  # 4 GiB of mask


def test_the_reading_is_remembered_per_layout_and_width():
    """`mask_reading` is memoised by value: asking again gives the same answer object, another
    width or layout its own answer (a (N, 1) mask broadcast over rows of 1 and of 4 words)."""
    rows = Layout((64, 256), (1, 0), 0)
    assert mask_reading(rows, 4) is mask_reading(Layout((64, 256), (1, 0), 0), 4)
    assert mask_reading(rows, 4).mode == PER_WORD and mask_reading(rows, 4).runs == ((256, 64),)
    assert mask_reading(Layout((64, 2), (1, 0), 0), 4).mode == PER_ELEMENT  # 2 elements: not a word
    assert mask_reading(Layout((64, 256), (256, 1), 0), 4).mode == DENSE
