"""`lazyfuel.bench.best_of`: every implementation of each op timed at each size (the best of the
repeats, after a warm-up), a wrong answer refused, an unknown op named with the known ones, and
the table with the speed relative to numpy. Real workloads at a tiny size on the CPU backend."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from lazyfuel.bench.best_of import Timing, measure, table
from lazyfuel.bench.workloads import IMPLEMENTATIONS, WORKLOADS, Workload

bench = importlib.import_module("lazyfuel.bench.best_of")  # the package re-exports measure()


def test_each_implementation_at_each_size_is_timed_and_reported(monkeypatch):
    monkeypatch.setenv("LAZYFUEL_BACKEND", "cpu")
    lines: list[str] = []
    timings = measure(["masked_fill", "gather"], sizes=(32 * 1024, 64 * 1024), repeats=2,
                      progress=lines.append)
    assert [(t.op, t.size, t.impl) for t in timings] == [
        (op, size, impl) for op in ("masked_fill", "gather") for size in (32 * 1024, 64 * 1024)
        for impl in IMPLEMENTATIONS]
    assert all(t.seconds > 0 for t in timings) and len(lines) == len(timings)
    assert lines[0].startswith("masked_fill") and lines[0].endswith("GB/s")


def test_a_wrong_answer_is_refused(monkeypatch):
    def broken(size, rng):
        return Workload("broken", size, 8, {"numpy": lambda: np.zeros(2), "dask": lambda: np.zeros(2),
                                            "lazyfuel": lambda: np.ones(2)})

    monkeypatch.setitem(WORKLOADS, "broken", broken)
    with pytest.raises(RuntimeError, match=r"^bench broken at 16 bytes: lazyfuel disagrees with numpy$"):
        measure(["broken"], sizes=(16,), repeats=1)


def test_an_unknown_op_names_the_known_ones():
    with pytest.raises(ValueError, match=r"^unknown bench op 'flip'; expected one of index_select, gather, "):
        measure(["flip"])


def test_the_best_of_the_repeats_is_kept(monkeypatch):
    times = iter([0.5, 0.2, 0.9] * 3)
    monkeypatch.setattr(bench, "_time", lambda run: next(times))
    work = {"numpy": lambda: np.zeros(1), "dask": lambda: np.zeros(1), "lazyfuel": lambda: np.zeros(1)}
    monkeypatch.setitem(WORKLOADS, "tiny", lambda size, rng: Workload("tiny", size, 100, work))
    assert [t.seconds for t in measure(["tiny"], sizes=(1,), repeats=3)] == [0.2, 0.2, 0.2]


def test_gbps_and_the_table_relative_to_numpy():
    timings = [Timing("gather", 4 * 2**20, "numpy", 0.004, 8_000_000),
               Timing("gather", 4 * 2**20, "lazyfuel", 0.001, 8_000_000),
               Timing("masked_fill", 2**20, "dask", 0.002, 1_000_000)]
    assert timings[1].gbps == 8.0
    assert table(timings).splitlines() == [
        "op           size   impl      time     GB/s  vs numpy",
        "gather       4 MiB  numpy     4.00 ms  2.00  1.00x",
        "gather       4 MiB  lazyfuel  1.00 ms  8.00  4.00x",
        "masked_fill  1 MiB  dask      2.00 ms  0.50  -",
    ]
