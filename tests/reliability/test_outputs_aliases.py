"""Aliases are resolved (issue 16, #1, #2, #5): an output that is an input, or two outputs in one place,
compared as the file system sees them (symlinks, hard links, one inside the other), are errors
naming both; `compute(out=)` refuses an `out` sharing memory with any array the graph reads.
"""

from __future__ import annotations

import os
from pathlib import Path

import dask.array as da
import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel import cli
from lazyfuel.pipeline import GraphError, load_graph

RNG = np.random.default_rng(1605)
TABLE = RNG.standard_normal((64, 8)).astype(np.float32)


def graph(tmp_path: Path, inputs: str, outputs: str) -> Path:
    path = tmp_path / "graph.yaml"
    path.write_text(f"inputs:\n{inputs}steps:\n"
                    "  - {name: y, op: index_select, x: t, dim: 0, indices: [3, 1]}\n"
                    f"  - {{name: z, op: transpose, x: y}}\noutputs:\n{outputs}")
    return path


def test_an_output_written_through_a_symlink_to_its_input_is_an_error_naming_both(tmp_path, capsys):
    table = tmp_path / "table.zarr"
    lf.from_array(TABLE, chunks=(16, 8)).to_zarr(table)
    (tmp_path / "alias.zarr").symlink_to(table)
    path = graph(tmp_path, "  t: {zarr: alias.zarr}\n", "  - {value: y, zarr: table.zarr}\n")
    with pytest.raises(GraphError) as caught:
        load_graph(path)
    assert caught.value.line == 7
    assert (f"zarr: output 'y' would write {table}, the same place as input 't' "
            f"(zarr: {tmp_path}/alias.zarr, "
            f"which is {table.resolve()}), which it reads; write the output elsewhere") in caught.value.reason
    assert cli.main(["run", "--no-progress", str(path)]) == 1  # the CLI: an error and exit 1, nothing run
    assert "the same place as input 't'" in capsys.readouterr().err
    assert np.array_equal(lf.from_zarr(table).compute(), TABLE)  # the input is intact


def test_an_output_inside_an_input_or_a_hard_link_to_it_is_an_error(tmp_path):
    np.save(tmp_path / "src.npy", TABLE)
    os.link(tmp_path / "src.npy", tmp_path / "same.npy")
    path = graph(tmp_path, "  t: {npy: src.npy}\n", "  - {value: y, npy: same.npy}\n")
    with pytest.raises(GraphError, match=r"output 'y' would write .*same\.npy, the same place as input 't' "
                                         r"\(npy: .*src\.npy\)"):
        load_graph(path)
    lf.from_array(TABLE).to_zarr(tmp_path / "table.zarr")
    path = graph(tmp_path, "  t: {zarr: table.zarr}\n", "  - {value: y, npy: table.zarr/y.npy}\n")
    with pytest.raises(GraphError, match=r"would write .*table\.zarr/y\.npy, the same place as input"):
        load_graph(path)


@pytest.mark.parametrize("kind", ["zarr", "npy"])
def test_two_outputs_in_one_place_are_an_error_naming_both(tmp_path, kind):
    (tmp_path / "links").symlink_to(tmp_path)
    a, b = f"out.{kind}", f"links/out.{kind}"  # one place, two spellings (a symlinked folder)
    path = graph(tmp_path, "  t: {values: [[1, 2], [3, 4], [5, 6], [7, 8]]}\n",
                 f"  - {{value: y, {kind}: {a}}}\n  - {{value: z, {kind}: {b}}}\n")
    with pytest.raises(GraphError) as caught:
        load_graph(path)
    assert caught.value.line == 8
    assert (f"{kind}: output 'z' would write {tmp_path}/links/out.{kind}, the same place as output 'y' "
            f"(line 7: {kind}: {tmp_path}/out.{kind}); give each output its own path") in caught.value.reason
    path.write_text(path.read_text().replace(b, a))  # the same spelling: caught too (case 2 of issue 16)
    with pytest.raises(GraphError, match=f"output 'z' would write .*out.{kind}, the same place as output"):
        load_graph(path)
    assert not (tmp_path / a).exists()


def test_compute_out_refuses_an_out_that_is_its_own_source(backend):
    a = RNG.standard_normal((256, 256)).astype(np.float32)
    before = a.copy()
    y = lf.index_select(a, 0, np.arange(255, -1, -1))
    with pytest.raises(ValueError, match=r"out shares memory with the data of index_select \(shape "
                                         r"\(256, 256\), float32\), which this computation reads while it "
                                         r"writes out"):
        y.compute(out=a)
    assert np.array_equal(a, before)  # nothing written
    with pytest.raises(ValueError, match="out shares memory with the data of masked_fill"):
        lf.masked_fill(lf.transpose(a), before > 0, 0.0).compute(out=a.T)  # through a view
    # dask's from_array holds copies of the chunks, not views: nothing to overlap, and exact
    assert np.array_equal(lf.index_select(da.from_array(a, chunks=64), 0, [1, 0]).compute(out=a[:2]),
                          before[[1, 0]])


def test_compute_out_over_the_indices_is_exact_and_over_a_mask_is_refused(backend):
    rows = RNG.integers(0, 300_000, 300_000)  # over 1 MiB: still a snapshot taken when built
    src = RNG.integers(0, 1000, 300_000)
    want = src[rows]
    assert lf.index_select(src, 0, rows).compute(out=rows) is rows  # the graph reads its snapshot
    assert np.array_equal(rows, want)
    buf = np.zeros(2 * 64 * 64, np.uint8)
    mask = buf[:64 * 64].view(bool).reshape(64, 64)
    x = np.ones((64, 64), np.uint8).view(bool)
    with pytest.raises(ValueError, match="out shares memory with the mask of masked_fill"):
        lf.masked_fill(x, mask, False).compute(out=buf[64 * 32: 64 * 96].view(bool).reshape(64, 64))


def test_compute_out_beside_its_source_in_one_buffer_is_exact(backend):
    buf = RNG.standard_normal((512, 64)).astype(np.float32)
    a, out = buf[:256], buf[256:]  # one allocation, no shared bytes: accepted, as numpy would
    want = a[::-1] * 1
    assert lf.index_select(a, 0, np.arange(255, -1, -1)).compute(out=out) is out
    assert np.array_equal(out, want) and np.array_equal(a, want[::-1])
