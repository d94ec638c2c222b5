"""`lazyfuel.pipeline.outputs`: the checksum of an output's bytes in C order (whatever its layout,
and the same read back in row blocks), the line printed for it, .npy outputs written region by
region beside their path and moved in when whole, and what may not be replaced refused by name.
Real files and zarr stores in a temporary folder, fresh random data, the CPU backend."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import dask
import ml_dtypes
import numpy as np
import pytest
import zarr

import lazyfuel as lf
from lazyfuel.pipeline import outputs
from lazyfuel.pipeline.document import GraphError
from lazyfuel.pipeline.outputs import NpyTarget, Summary, check, checksum, summarise, target
from lazyfuel.pipeline.spec import OutputSpec

RNG = np.random.default_rng()


def test_the_checksum_is_of_the_bytes_in_c_order_whatever_the_layout():
    a = RNG.standard_normal((5, 7)).astype(np.float32)
    assert checksum(a) == hashlib.sha256(a.tobytes()).hexdigest()[:16]
    assert checksum(np.asfortranarray(a)) == checksum(a) != checksum(a.T)


def test_reading_back_in_row_blocks_gives_the_same_checksum(monkeypatch):
    a = RNG.integers(0, 2**16, (37, 5), dtype=np.uint16)
    monkeypatch.setattr(outputs, "_BLOCK_BYTES", 3 * 5 * 2)  # three rows a block: 13 blocks
    assert outputs._digest_rows(a) == checksum(a)
    assert outputs._digest_rows(np.zeros((0, 4))) == checksum(np.zeros((0, 4)))
    assert outputs._digest_rows(np.float64(2.5)) == checksum(np.float64(2.5))


def test_a_summary_prints_shape_dtype_size_checksum_and_where(tmp_path):
    s = Summary("rows", "npy", tmp_path / "rows.npy", (3, 4), np.dtype(np.float32), 3 * 2**20,
                "0123456789abcdef")
    assert s.line() == f"rows: shape (3, 4) float32 (3.0 MiB) sha256 0123456789abcdef -> {tmp_path}/rows.npy"
    here = Summary("x", "summary", None, (2,), np.dtype(np.int8), 2, "ff" * 8)
    assert here.line() == "x: shape (2,) int8 (2 B) sha256 ffffffffffffffff"
    assert outputs._shown(Path(os.getcwd()) / "a" / "b.npy") == "a/b.npy"


def test_an_npy_target_writes_each_region_into_the_file(tmp_path):
    a = RNG.standard_normal((6, 3))
    path = tmp_path / "t.npy"
    np.lib.format.open_memmap(path, mode="w+", dtype=a.dtype, shape=a.shape).flush()
    t = NpyTarget(str(path), a.shape, a.dtype)
    assert t.ndim == 2
    t[(slice(0, 4), slice(None))] = a[:4]
    t[(slice(4, 6), slice(None))] = a[4:]
    assert np.load(path).tobytes() == a.tobytes()


def test_an_npy_output_is_written_beside_and_moved_in_when_whole(tmp_path, monkeypatch):
    monkeypatch.setenv("LAZYFUEL_BACKEND", "cpu")
    a = RNG.standard_normal((8, 4)).astype(np.float32)
    arr = lf.from_array(a, chunks=(3, 4)).index_select(0, [7, 0, 3, 3])
    path = tmp_path / "out" / "sel.npy"
    spec = OutputSpec("sel", "npy", path, 5)
    job = target(spec, arr, "g.yaml")
    assert not path.exists()
    assert [p.name[:13] for p in path.parent.iterdir()] == [".sel.npy.tmp-"]  # written beside it
    dask.compute(job, scheduler="threads")
    assert np.load(path).tobytes() == a[[7, 0, 3, 3]].tobytes() and os.listdir(path.parent) == ["sel.npy"]
    summary = summarise(spec, arr, None)
    assert (summary.shape, summary.checksum) == ((4, 4), checksum(a[[7, 0, 3, 3]]))
    dask.compute(target(spec, arr.masked_fill(np.ones((4, 4), bool), 0.0), "g.yaml"))  # over the old one
    assert not np.load(path).any()


def test_a_summary_output_computes_the_array_itself(monkeypatch):
    monkeypatch.setenv("LAZYFUEL_BACKEND", "cpu")
    a = RNG.standard_normal((4, 4)).astype(np.float32)
    arr = lf.from_array(a, chunks=2).T
    spec = OutputSpec("t", "summary", None, 3)
    (computed,) = dask.compute(target(spec, arr, "g.yaml"))
    assert summarise(spec, arr, computed).checksum == checksum(a.T)


@pytest.mark.parametrize(("kind", "make", "why"), [
    ("npy", lambda p: p.mkdir(), "not a file"),
    ("zarr", lambda p: p.write_text("x"), "not a folder"),
    ("zarr", lambda p: (p.mkdir(), (p / "notes.txt").write_text("mine")),
     "a folder that is not a zarr store"),
    ("zarr", lambda p: zarr.create_array(str(p), shape=(2,), dtype="f4"),
     "a zarr store lazyfuel did not write (no lazyfuel attribute); delete it yourself"),
])
def test_what_lazyfuel_does_not_write_there_is_never_replaced(tmp_path, kind, make, why):
    path = tmp_path / f"out.{kind}"
    make(path)
    spec = OutputSpec("o", kind, path, 9)
    with pytest.raises(GraphError) as caught:
        target(spec, lf.from_array(np.zeros(2, np.float32)), "g.yaml")
    err = caught.value
    assert (err.line, err.context) == (9, "output 'o'")
    assert err.reason == f"{kind}: {path} exists and is {why}; refusing to overwrite it"


def test_bfloat16_is_refused_for_stored_outputs_and_kept_for_summaries():
    arr = lf.from_array(np.zeros(4, ml_dtypes.bfloat16))
    check(OutputSpec("b", "summary", None, 2), arr, "g.yaml")
    with pytest.raises(GraphError, match=r"^g\.yaml:2: output 'b': zarr cannot store bfloat16 \(numpy has no "
                                         r"native bf16\); keep 'b' a summary output$"):
        check(OutputSpec("b", "zarr", Path("b.zarr"), 2), arr, "g.yaml")
