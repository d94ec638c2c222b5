"""Every graph in graphs/ runs; results match numpy and do not depend on the backend; the
out-of-core graph stays under its memory limit with a store larger than that limit; every op the
graph format offers runs and matches numpy."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel.pipeline import GraphError, build, execute, load_graph
from lazyfuel.pipeline.inputs import random_array
from lazyfuel.pipeline.outputs import checksum

from .conftest import GRAPHS, write_graph
from .reference import numpy_reference, through_fft

NAMES = sorted(p.name for p in GRAPHS.glob("*.yaml"))


def _run(path: Path, **overrides: str):
    built = build(load_graph(path, overrides))
    return built, execute(built, progress=False)


def _inputs(path: Path) -> dict[str, np.ndarray]:
    """The generated inputs of a graph as numpy arrays (the same bytes the run reads)."""
    return {i.name: random_array(i.options).compute() for i in load_graph(path).inputs
            if i.kind in ("random", "indices", "mask")}


def test_the_shipped_graphs_are_there():
    assert {"quickstart.yaml", "out_of_core.yaml", "embedding_lookup.yaml",
            "spectral_features.yaml"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_every_graph_runs_and_matches_its_numpy_reference(graphs: Path, name: str):
    built, result = _run(graphs / name)
    assert len(result.summaries) == len(built.graph.outputs) > 0
    want = numpy_reference(built)
    for (spec, arr), summary in zip(built.outputs, result.summaries):
        expected = want[spec.value]
        assert (summary.shape, summary.dtype) == (expected.shape, expected.dtype)
        if through_fft(built, spec.value):  # an FFT backend's rounding: close, and the same run to run
            got = arr.compute()
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())
            assert summary.checksum == checksum(got)
        else:
            assert summary.checksum == checksum(expected)
        assert summary.path is None or summary.path.exists()


def test_quickstart_matches_numpy(graphs: Path):
    path = graphs / "quickstart.yaml"
    _, result = _run(path)
    x = _inputs(path)
    samples = x["table"][x["ids"]]
    shuffled = np.take_along_axis(samples.T, x["perm"], axis=0)
    dropped = np.where(x["dropout"], np.float32(0), shuffled)
    by_name = {s.value: s for s in result.summaries}
    assert by_name["dropped"].checksum == checksum(dropped)
    assert by_name["samples"].checksum == checksum(samples)
    np.testing.assert_array_equal(np.load(by_name["samples"].path), samples)


def test_embedding_lookup_matches_numpy_on_each_backend(graphs: Path, backend: str):
    path = graphs / "embedding_lookup.yaml"
    _, result = _run(path, tokens="2048")
    x = {i.name: random_array(i.options).compute() for i in load_graph(path, {"tokens": "2048"}).inputs}
    assert x["table"].dtype.name == "bfloat16"
    want = np.where(x["padding"], x["table"].dtype.type(0), x["table"][x["token_ids"]])
    assert result.summaries[0].checksum == checksum(want)


def test_out_of_core_gather_stays_under_its_memory_limit(graphs: Path):
    path = graphs / "out_of_core.yaml"
    graph = load_graph(path)
    cols = graph.params["cols"]
    # Make the store larger than the limit however many threads this machine has.
    rows = max(graph.params["rows"], math.ceil(1.25 * graph.memory_limit / (cols * 4) / 8192) * 8192)
    built, result = _run(path, rows=str(rows))
    table = built.values["table"]
    assert table.nbytes > built.graph.memory_limit
    assert result.peak_growth is not None and result.peak_growth <= built.graph.memory_limit
    out = lf.from_zarr(result.summaries[0].path)
    assert out.shape == (rows, graph.params["k"])
    # spot-check a band of rows against the store itself
    import zarr

    store = zarr.open_array(str(built.graph.inputs[0].options.path), mode="r")
    picks = random_array(built.graph.inputs[1].options)[:4096].compute()
    got = out[:4096].compute()
    np.testing.assert_array_equal(got, np.take_along_axis(store[:4096], picks, axis=1))


def test_a_graph_using_every_op_matches_numpy(tmp_path: Path):
    path = write_graph(tmp_path, """
inputs:
  a: {random: {shape: [40, 12], chunks: [16, 12], seed: 5}}
  rows: {indices: {shape: [30], high: 40, seed: 6, chunks: 8}}
  cols: {indices: {shape: [12, 15], high: 30, seed: 7, chunks: [12, 8]}}
  keep: {mask: {shape: [15, 1], density: 0.3, seed: 8}}
steps:
  - {name: picked, op: index_select, x: a, dim: 0, indices: rows}       # (30, 12)
  - {name: t, op: transpose, x: picked}                                 # (12, 30)
  - {name: g, op: gather, x: t, dim: 1, indices: cols}                  # (12, 15)
  - {name: tt, op: transpose, x: g, axes: [1, 0]}                       # (15, 12)
  - {name: filled, op: masked_fill, x: tt, mask: keep, value: -1.5}     # (15, 12)
  - {name: rev, op: slice, x: filled, index: "::-2, 1:"}                # (8, 11)
  - {name: first, op: getitem, x: rev, index: [0, "..."]}               # (11,)
  - {name: wide, op: broadcast_to, x: first, shape: [3, 11]}            # (3, 11)
  - {name: dense, op: contiguous, x: wide}
outputs: [filled, rev, dense]
""")
    _, result = _run(path)
    x = _inputs(path)
    g = np.take_along_axis(x["a"][x["rows"]].T, x["cols"], axis=1)
    filled = np.where(x["keep"], np.float32(-1.5), g.T)
    rev = filled[::-2, 1:]
    dense = np.broadcast_to(rev[0, ...], (3, 11))
    assert [s.checksum for s in result.summaries] == [checksum(filled), checksum(rev), checksum(dense)]
    assert [s.shape for s in result.summaries] == [(15, 12), (8, 11), (3, 11)]


def test_inline_values_npy_inputs_and_npy_zarr_outputs(tmp_path: Path):
    src = np.arange(24, dtype=np.float64).reshape(6, 4)
    np.save(tmp_path / "src.npy", src)
    path = write_graph(tmp_path, """
inputs:
  src: {npy: src.npy, chunks: [4, 4]}
steps:
  - {name: rows, op: index_select, x: src, dim: 0, indices: [5, 0, 2]}
outputs:
  - {value: rows, npy: out/rows.npy}
  - {value: rows, zarr: out/rows.zarr}
""")
    _, result = _run(path)
    want = src[[5, 0, 2]]
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "rows.npy"), want)
    np.testing.assert_array_equal(lf.from_zarr(tmp_path / "out" / "rows.zarr").compute(), want)
    assert {s.checksum for s in result.summaries} == {checksum(want)}


def test_generated_inputs_do_not_depend_on_the_scheduler(tmp_path: Path):
    path = write_graph(tmp_path, "inputs:\n  a: {random: {shape: [64, 8], chunks: [16, 8], seed: 3}}\n"
                       "  i: {indices: {shape: [100], high: 64, sorted: true, chunks: 30}}\n"
                       "steps:\n  - {name: b, op: contiguous, x: a}\noutputs: [b]\n")
    graph = load_graph(path)
    a, i = (random_array(s.options) for s in graph.inputs)
    assert checksum(a.compute(scheduler="sync")) == checksum(a.compute(scheduler="threads"))
    idx = i.compute()
    assert idx.min() >= 0 and idx.max() < 64 and (np.diff(idx) >= 0).all()


def test_an_output_never_deletes_a_folder_that_is_not_a_store(tmp_path: Path):
    keep = tmp_path / "precious"
    keep.mkdir()
    (keep / "notes.txt").write_text("do not delete")
    path = write_graph(tmp_path, "inputs:\n  a: {random: {shape: [8, 4]}}\nsteps:\n"
                       "  - {name: t, op: transpose, x: a}\noutputs:\n  - {value: t, zarr: precious}\n")
    with pytest.raises(GraphError) as caught:
        _run(path)
    assert caught.value.line == 6 and caught.value.context == "output 't'"
    assert "exists and is a folder that is not a zarr store; refusing to overwrite it" in caught.value.reason
    assert (keep / "notes.txt").read_text() == "do not delete"
    # a zarr store there is replaced
    path.write_text(path.read_text().replace("precious", "out.zarr"))
    _run(path)
    _, result = _run(path)
    assert result.summaries[0].shape == (4, 8)
