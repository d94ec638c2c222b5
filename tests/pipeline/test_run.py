"""`lazyfuel.pipeline.run`: a graph built into lazy Arrays (a failing step named at its line),
executed into summaries whose checksums are numpy's, the logical bytes counted, an index found out
of range while computing located at its step, a memory limit enforced, notices held until the
progress bar is done, and `explain` planning without writing. Real graphs on the CPU backend."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import numpy as np
import pytest

from lazyfuel.notices import LOGGER
from lazyfuel.pipeline import GraphError, load_graph
from lazyfuel.pipeline.inputs import random_array
from lazyfuel.pipeline.outputs import checksum
from lazyfuel.pipeline.run import GraphIndexError, _MemoryWatch, build, execute, explain, held_notices


@pytest.fixture(autouse=True)
def cpu(monkeypatch):
    monkeypatch.setenv("LAZYFUEL_BACKEND", "cpu")


def graph(tmp_path: Path, text: str):
    path = tmp_path / "g.yaml"
    path.write_text(text, encoding="utf-8")
    return load_graph(path)


SELECT = """\
inputs:
  a: {random: {shape: [20, 6], chunks: [8, 6], seed: 4}}
  i: {indices: {shape: [9], high: 20, seed: 5, chunks: 4}}
steps:
  - {name: rows, op: index_select, x: a, dim: 0, indices: i}
  - {name: t, op: transpose, x: rows}
outputs: [rows, t]
"""


def test_a_graph_runs_into_summaries_with_numpys_checksums(tmp_path):
    g = graph(tmp_path, SELECT)
    built = build(g, log=lambda line: None)
    assert set(built.values) == {"a", "i", "rows", "t"}
    assert [s.value for s, _ in built.outputs] == ["rows", "t"]
    result = execute(built, scheduler="sync", progress=False)
    a, i = (random_array(s.options).compute() for s in g.inputs)
    assert [s.checksum for s in result.summaries] == [checksum(a[i]), checksum(a[i].T)]
    assert result.scheduler == "sync" and result.wall_seconds > 0
    assert result.logical_bytes == a.nbytes + i.nbytes + 2 * a[i].nbytes  # inputs read, outputs written
    assert result.bytes_moved == result.logical_bytes  # numpy kernels move nothing to a device


def test_a_failing_step_is_named_at_its_line(tmp_path):
    g = graph(tmp_path, SELECT.replace("dim: 0, indices: i}", "dim: 0, indices: i}\n"
                                       "  - {name: bad, op: gather, x: a, dim: 1, indices: i}"))
    with pytest.raises(GraphError) as caught:
        build(g)
    err = caught.value
    assert (err.line, err.context, err.step) == (6, "step 'bad'", "bad")
    assert err.reason.startswith("gather index has 1 dims but the source has 2")  # already says gather
    g = graph(tmp_path, SELECT.replace("dim: 0, indices: i}", "dim: 5, indices: i}"))
    with pytest.raises(GraphError) as caught:
        build(g)
    assert caught.value.line == 5 and caught.value.reason.startswith("index_select: dim 5 is out of range")


def test_an_index_out_of_range_met_while_computing_is_located_at_its_step(tmp_path):
    g = graph(tmp_path, SELECT.replace("high: 20", "high: 25"))
    built = build(g)
    with pytest.raises(GraphIndexError) as caught:
        execute(built, scheduler="sync", progress=False)
    err = caught.value
    assert isinstance(err, IndexError) and isinstance(err, GraphError)
    assert (err.line, err.context, err.step) == (5, "step 'rows', indices 'i'", "rows")
    assert "is out of range" in err.reason
    assert list(tmp_path.iterdir()) == [tmp_path / "g.yaml"]  # nothing left behind


def test_a_memory_limit_is_enforced_at_its_line(tmp_path):
    g = graph(tmp_path, "limits:\n  memory: 1024\n" + SELECT.replace("[20, 6]", "[200000, 6]")
              .replace("[8, 6]", "[50000, 6]").replace("high: 20", "high: 200000"))
    with pytest.raises(GraphError) as caught:
        execute(build(g), scheduler="sync", progress=False)
    assert (caught.value.line, caught.value.context) == (2, "limits")
    assert caught.value.reason.startswith("memory grew by ")
    assert caught.value.reason.endswith("MiB during the run, over the graph's limit of 0.0 MiB")


def test_explain_plans_without_writing_a_generated_store(tmp_path):
    g = graph(tmp_path, "inputs:\n  z: {zarr: z.zarr, generate: {shape: [8, 4], chunks: [4, 4]}}\n"
              "steps:\n  - {name: c, op: contiguous, x: z}\noutputs: [c]\n")
    text = explain(g)
    assert text.startswith("# g")
    assert f"(the store {tmp_path / 'z.zarr'} is not written yet; the plan reads its generator" in text
    assert "\n## output 'c' (summary)\n" in text
    assert not (tmp_path / "z.zarr").exists()


def test_notices_are_held_until_the_block_ends_then_shown_in_order(caplog):
    shown: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        saved = warnings.showwarning
        warnings.showwarning = lambda message, *rest: shown.append(f"warning: {message}")
        try:
            with caplog.at_level(logging.WARNING, logger="lazyfuel"):
                with held_notices():
                    warnings.warn("first", UserWarning, stacklevel=1)
                    LOGGER.warning("second")
                    assert shown == [] and "second" not in caplog.text
                assert shown == ["warning: first"] and "second" in caplog.text
        finally:
            warnings.showwarning = saved


def test_the_memory_watch_sees_growth_while_it_runs():
    with _MemoryWatch(enabled=True) as watch:
        block = np.ones(64 * 2**20, np.uint8)  # 64 MiB touched
    del block
    assert watch.growth is not None and watch.growth >= 32 * 2**20
    with _MemoryWatch(enabled=False) as off:
        pass
    assert off.growth is None
