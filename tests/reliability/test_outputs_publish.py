"""Outputs are published whole (issue 16, #4, #12): written beside the target and renamed in, an old
output kept until the new one replaces it, a folder that is not a store never deleted, and what
killed writers left beside an output cleaned by the next writer (only when its process is dead).
A "dead writer" here is a real process that ran and exited; its pid names the leftovers.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import zarr

import lazyfuel as lf
from lazyfuel import publish
from lazyfuel.integrity import DamagedStoreError
from lazyfuel.pipeline import GraphError, build, execute, load_graph

RNG = np.random.default_rng(1604)
OLD = RNG.standard_normal((24, 5)).astype(np.float32)
NEW = RNG.standard_normal((24, 5)).astype(np.float32)


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen(["true"])
    child.wait()
    assert not publish.process_alive(child.pid)
    return child.pid


def test_to_zarr_with_overwrite_never_deletes_a_folder_that_is_not_a_store(tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.txt").write_text("keep")
    refusal = r"to_zarr: .*notes exists and is not a zarr store \(no zarr.json, \.zarray or \.zgroup at its"
    with pytest.raises(FileExistsError, match=refusal + r" root\); lazyfuel never deletes"):
        lf.from_array(NEW).to_zarr(notes, overwrite=True)
    assert (notes / "a.txt").read_text() == "keep" and sorted(os.listdir(tmp_path)) == ["notes"]


def test_an_existing_store_is_kept_without_overwrite_and_replaced_whole_with_it(tmp_path):
    out = tmp_path / "out.zarr"
    lf.from_array(OLD, chunks=(8, 5)).to_zarr(out)
    with pytest.raises(FileExistsError, match=r"out.zarr already holds a zarr store; pass overwrite=True"):
        lf.from_array(NEW, chunks=(8, 5)).to_zarr(out)
    assert np.array_equal(lf.from_zarr(out).compute(), OLD)
    lazy = lf.from_array(NEW, chunks=(6, 5)).to_zarr(out, overwrite=True, compute=False)
    assert np.array_equal(lf.from_zarr(out).compute(), OLD)  # built, not run: the old store is there
    lazy.compute()
    assert np.array_equal(lf.from_zarr(out).compute(), NEW) and lf.from_zarr(out).chunks[0] == (6,) * 4
    assert sorted(os.listdir(tmp_path)) == ["out.zarr"]


def test_a_store_reached_through_a_symlink_is_replaced_where_it_is(tmp_path):
    real, alias = tmp_path / "real.zarr", tmp_path / "alias.zarr"
    lf.from_array(OLD).to_zarr(real)
    alias.symlink_to(real)
    lf.from_array(NEW).to_zarr(alias, overwrite=True)
    assert alias.is_symlink() and np.array_equal(lf.from_zarr(real).compute(), NEW)


def test_writing_over_its_own_source_is_exact_and_the_old_view_then_refuses_to_read(tmp_path):
    path = tmp_path / "t.zarr"
    lf.from_array(OLD, chunks=(8, 5)).to_zarr(path)
    source = lf.from_zarr(path)
    lf.index_select(source, 0, np.arange(23, -1, -1)).to_zarr(path, overwrite=True)
    assert np.array_equal(lf.from_zarr(path).compute(), OLD[::-1])  # read the old store, then swapped in
    with pytest.raises(DamagedStoreError, match=r"does not hold what lazyfuel wrote there .* or the store "
                                                r"was replaced after it was opened"):
        source.compute()  # opened before the swap: its checksums are the old store's


def test_arguments_to_zarr_cannot_honour_are_type_errors(tmp_path):
    with pytest.raises(TypeError, match=r"to_zarr: shards= is not supported \(each block is written"):
        lf.from_array(OLD).to_zarr(tmp_path / "s.zarr", shards=(24, 5))
    z = zarr.create_array(str(tmp_path / "z.zarr"), shape=OLD.shape, dtype=OLD.dtype)
    with pytest.raises(TypeError, match="to_zarr takes a path, URL or zarr store, not a zarr Array"):
        lf.from_array(OLD).to_zarr(z)


def test_a_component_is_published_into_its_group_beside_the_others(tmp_path):
    group = tmp_path / "g.zarr"
    lf.from_array(OLD).to_zarr(group, component="a/old")
    lf.from_array(NEW).to_zarr(group, component="a/new")
    lf.from_array(NEW[:3]).to_zarr(group, component="a/old", overwrite=True)
    assert np.array_equal(lf.from_zarr(group, component="a/new").compute(), NEW)
    assert np.array_equal(lf.from_zarr(group, component="a/old").compute(), NEW[:3])
    assert sorted(zarr.open_group(str(group), mode="r")["a"].array_keys()) == ["new", "old"]
    assert sorted(os.listdir(tmp_path)) == ["g.zarr"]


def test_leftovers_of_dead_writers_are_cleaned_and_live_ones_kept(tmp_path):
    out = tmp_path / "out.zarr"
    lf.from_array(OLD).to_zarr(out)
    dead = dead_pid()
    killed = tmp_path / f".out.zarr.tmp-{dead}-0"  # a store a killed writer was filling
    lf.from_array(NEW).to_zarr(killed)
    (tmp_path / f".out.zarr.tmp-{dead}").mkdir()  # the name a killed `generate:` input left
    live = tmp_path / f".out.zarr.tmp-{os.getppid()}-0"  # a writer that is still running
    live.mkdir()
    foreign = tmp_path / f".out.zarr.tmp-{dead}-1"  # the right name, but not what lazyfuel leaves
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep")
    lf.from_array(NEW).to_zarr(out, overwrite=True)
    assert sorted(os.listdir(tmp_path)) == sorted(["out.zarr", live.name, foreign.name])
    assert np.array_equal(lf.from_zarr(out).compute(), NEW)


def test_an_old_output_renamed_aside_by_a_killed_writer_is_put_back(tmp_path):
    out = tmp_path / "out.zarr"
    aside = tmp_path / f".out.zarr.old-{dead_pid()}-3"
    lf.from_array(OLD).to_zarr(aside)  # killed between moving the old store aside and the new one in
    assert publish.clean_leftovers(out) == [aside]
    assert np.array_equal(lf.from_zarr(out).compute(), OLD)
    lf.from_array(NEW).to_zarr(aside)  # a new store is in place: the old copy is just deleted
    assert publish.clean_leftovers(out) == [aside]
    assert sorted(os.listdir(tmp_path)) == ["out.zarr"]


def test_a_kill_while_deleting_the_old_store_leaves_something_the_next_run_cleans(tmp_path):
    gone = tmp_path / f".out.zarr.tmp-{dead_pid()}-0"
    lf.from_array(OLD, chunks=(4, 5)).to_zarr(gone)
    for name in os.listdir(gone / "c"):  # a deletion cut short: chunks gone, metadata not yet
        publish.remove(gone / "c" / name)
    assert publish.clean_leftovers(tmp_path / "out.zarr") == [gone]


def test_a_pipeline_keeps_an_old_output_on_failure_and_refuses_a_store_it_did_not_write(tmp_path):
    foreign = tmp_path / "foreign.zarr"
    zarr.create_array(str(foreign), shape=(2,), dtype="f4")[:] = 7
    path = tmp_path / "g.yaml"
    text = ("inputs:\n  a: {random: {shape: [24, 5], chunks: [8, 5], seed: $s}}\n"
            "  i: {indices: {shape: [24], high: $high, chunks: 8}}\nparams: {s: 1, high: 24}\n"
            "steps:\n  - {name: b, op: index_select, x: a, dim: 0, indices: i}\n"
            "outputs:\n  - {value: b, zarr: out.zarr}\n  - {value: b, npy: out.npy}\n")
    path.write_text(text)
    execute(build(load_graph(path)), progress=False)
    old = np.load(tmp_path / "out.npy")
    with pytest.raises(IndexError):  # indices up to 99 on an axis of 24: the run fails part way
        execute(build(load_graph(path, {"s": "2", "high": "100"})), progress=False)
    assert np.array_equal(np.load(tmp_path / "out.npy"), old)
    assert np.array_equal(lf.from_zarr(tmp_path / "out.zarr").compute(), old)
    assert sorted(os.listdir(tmp_path)) == ["foreign.zarr", "g.yaml", "out.npy", "out.zarr"]  # temps removed
    path.write_text(text.replace("out.zarr", "foreign.zarr"))
    with pytest.raises(GraphError, match=r"foreign.zarr exists and is a zarr store lazyfuel did not write "
                                         r"\(no lazyfuel attribute\); delete it yourself; refusing"):
        execute(build(load_graph(path)), progress=False)
    assert np.array_equal(zarr.open_array(str(foreign), mode="r")[:], [7, 7])


def test_a_killed_generate_input_leaves_nothing_the_next_run_keeps(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_text("inputs:\n  x: {zarr: in.zarr, generate: {shape: [16, 4], chunks: [8, 4]}}\n"
                    "steps:\n  - {name: y, op: transpose, x: x}\noutputs: [y]\n")
    left = tmp_path / f".in.zarr.tmp-{dead_pid()}"  # what a killed generate left before issue 16
    left.mkdir()
    (left / "zarr.json").write_text("{}")
    result = execute(build(load_graph(path), log=lambda _: None), progress=False)
    assert result.summaries[0].shape == (4, 16)
    assert sorted(os.listdir(tmp_path)) == ["g.yaml", "in.zarr"]
    assert lf.from_zarr(tmp_path / "in.zarr").shape == (16, 4)


def test_install_swaps_folders_in_one_step_here(tmp_path: Path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "new").write_text("")
    (b / "old").write_text("")
    assert publish._exchange(a, b)  # renameat2(RENAME_EXCHANGE): this machine's file system has it
    assert os.listdir(b) == ["new"] and os.listdir(a) == ["old"]
