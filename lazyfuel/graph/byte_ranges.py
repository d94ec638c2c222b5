"""Byte ranges of raw chunks: touched rows merged into spans (`coalesced`, under `GAP_BYTES` and
`RANGE_BYTES`) and the spans of one chunk read through zarr's async store API (`_read_spans`,
`SPANS_IN_FLIGHT` at a time).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import Any

import numpy as np

GAP_BYTES = 64 * 2**10
"""Two touched byte ranges of a raw chunk closer than this are read as one. Measured on this
machine's disk with the page cache dropped (`benchmarks/probes/span_reads.py`, gaps of 16 KiB to
1 MiB): 8k-32k random rows of a 1.95 GB store read 2x faster at 64 KiB than at 256 KiB (0.15-0.36x
the bytes), 32 KiB within noise, 16 KiB slower at 32k rows (more reads than the disk's ~20k/s
pay for); from 131k rows on every gap reads nearly the whole store alike."""

RANGE_BYTES = 4 * 2**20
"""The longest single read of a raw chunk (merged ranges are cut there)."""

SPANS_IN_FLIGHT = 4
"""Reads of one raw chunk requested at once (so one read task holds at most 16 MiB of them)."""


def coalesced(offsets: np.ndarray, row_bytes: int) -> list[tuple[int, int, slice]]:
    """Ascending byte `offsets` of rows of `row_bytes` as spans `(first byte, end byte, the
    offsets in it)` to read whole: rows closer than `GAP_BYTES` share a span when they lie a whole
    number of rows apart, and no span is longer than `RANGE_BYTES`."""
    if offsets.size == 0:
        return []
    step = np.diff(offsets)
    breaks = np.flatnonzero((step - row_bytes > GAP_BYTES) | (step % row_bytes != 0)) + 1
    spans = []
    for a, b in pairwise([0, *breaks.tolist(), offsets.size]):
        while a < b:  # cut long spans at RANGE_BYTES
            end = a + max(1, int(np.searchsorted(offsets[a:b], offsets[a] + RANGE_BYTES - row_bytes,
                                                 side="right")))
            spans.append((int(offsets[a]), int(offsets[end - 1]) + row_bytes, slice(a, end)))
            a = end
    return spans


async def _read_spans(store_path: Any, spans: Sequence[tuple[int, int, slice]],
                      place: Callable[[int, slice, Any], None]) -> int:
    """Read each span of one stored chunk (at most `SPANS_IN_FLIGHT` at a time) and `place` it as
    it arrives; how many spans the store did not hold."""
    from zarr.abc.store import RangeByteRequest
    from zarr.core.buffer import default_buffer_prototype

    prototype, room = default_buffer_prototype(), asyncio.Semaphore(SPANS_IN_FLIGHT)

    async def one(lo: int, hi: int, part: slice) -> bool:
        async with room:
            buf = await store_path.get(prototype, RangeByteRequest(lo, hi))
            if buf is not None:
                place(lo, part, buf.as_numpy_array())
            return buf is None

    return sum(await asyncio.gather(*(one(*span) for span in spans)))
