"""Byte ranges of touched rows (`graph.byte_ranges`): close rows merged into one read, long ones cut."""

from __future__ import annotations

import numpy as np

from lazyfuel.graph import stored


def test_coalesced_spans_merge_close_rows_and_cut_long_ones():
    kib = 1024
    offsets = np.array([0, 1, 2, 10, 5000, 5001, 5002.5]) * kib  # rows of 1 KiB; gap 256 rows
    spans = stored.coalesced(offsets.astype(np.int64), row_bytes=kib)
    assert [(lo // kib, hi / kib) for lo, hi, _ in spans] == [(0, 11), (5000, 5002), (5002, 5003.5)]
    assert [(s.start, s.stop) for _, _, s in spans] == [(0, 4), (4, 6), (6, 7)]  # not a whole row apart
    rows = np.arange(0, 40_000, 2, dtype=np.int64)
    long = stored.coalesced(rows * kib, row_bytes=kib)  # cut at RANGE_BYTES (4 Ki rows)
    assert all(hi - lo <= stored.RANGE_BYTES for lo, hi, _ in long)
    assert sum(s.stop - s.start for _, _, s in long) == rows.size


def test_rows_further_apart_than_the_measured_gap_are_read_apart():
    # 64 KiB (this disk, fadvised reads: 8k-32k random rows of a 1.95 GB store read 2x faster than
    # with 256 KiB, bytes from disk 0.15-0.36x; out_of_core session 8)
    kib = 1024
    assert stored.GAP_BYTES == 64 * kib
    near = np.arange(0, 60 * 48, 48, dtype=np.int64) * kib  # 47 KiB between rows: one read
    assert len(stored.coalesced(near, row_bytes=kib)) == 1
    far = np.arange(0, 60 * 128, 128, dtype=np.int64) * kib  # 127 KiB between rows: one read each
    assert len(stored.coalesced(far, row_bytes=kib)) == 60
