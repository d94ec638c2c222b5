"""`lazyfuel.bench.workloads`: each op's numpy, dask and lazyfuel implementations give the same
bits on fresh random data (a small size, the CPU backend), on a table of 256 float32 columns cut
into blocks of about 16 MiB, and `bytes_moved` is what the op must read and write."""

from __future__ import annotations

import numpy as np
import pytest

from lazyfuel.bench.workloads import CHUNK_BYTES, COLUMNS, IMPLEMENTATIONS, WORKLOADS, _table

SIZE = 64 * 1024  # 64 rows of the table


@pytest.mark.parametrize("op", list(WORKLOADS))
def test_every_implementation_gives_numpys_bits(op: str, monkeypatch):
    monkeypatch.setenv("LAZYFUEL_BACKEND", "cpu")
    work = WORKLOADS[op](SIZE, np.random.default_rng())
    assert (work.op, work.size) == (op, SIZE) and tuple(work.runs) == IMPLEMENTATIONS
    results = {impl: run() for impl, run in work.runs.items()}
    want = results["numpy"]
    for impl, got in results.items():
        assert got.dtype == want.dtype and got.shape == want.shape, impl
        assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes(), impl


def test_bytes_moved_is_what_each_op_must_read_and_write():
    rows = SIZE // (COLUMNS * 4)
    rng = np.random.default_rng(1)
    assert WORKLOADS["index_select"](SIZE, rng).bytes_moved == 2 * (rows // 2) * COLUMNS * 4 + (rows // 2) * 4
    assert WORKLOADS["gather"](SIZE, rng).bytes_moved == 2 * rows * 64 * 4 + rows * 64 * 4
    assert WORKLOADS["masked_fill"](SIZE, rng).bytes_moved == 2 * SIZE + rows * COLUMNS
    assert WORKLOADS["transpose+contiguous"](SIZE, rng).bytes_moved == 2 * SIZE


def test_the_table_is_256_float32_columns_in_blocks_of_about_16_mib():
    a, chunk_rows = _table(SIZE, np.random.default_rng())
    assert a.shape == (64, COLUMNS) and a.dtype == np.float32 and chunk_rows == 64
    big, big_rows = _table(32 * 2**20, np.random.default_rng())
    assert big_rows * COLUMNS * 4 == CHUNK_BYTES and big.shape[0] == 2 * big_rows
    tiny, tiny_rows = _table(1, np.random.default_rng())
    assert tiny.shape == (1, COLUMNS) and tiny_rows == 1


def test_a_fixed_seed_makes_the_same_workload():
    a = WORKLOADS["gather"](SIZE, np.random.default_rng(5)).runs["numpy"]()
    b = WORKLOADS["gather"](SIZE, np.random.default_rng(5)).runs["numpy"]()
    assert a.tobytes() == b.tobytes()
