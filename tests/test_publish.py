"""`lazyfuel.publish`: outputs published whole (written beside the target under a temporary name,
then renamed or swapped into place), leftovers of dead writers cleaned, and only what a lazyfuel
writer leaves ever removed. Real files, folders and processes in a temporary folder."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lazyfuel import publish


def zarr_store(path: Path, value: str) -> Path:
    path.mkdir()
    (path / "zarr.json").write_text("{}")
    (path / "c").mkdir()
    (path / "c" / "0").write_text(value)
    return path


def dead_pid() -> int:
    """The pid of a process that ran and was reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_zarr_store_is_a_folder_with_v2_or_v3_metadata_at_its_root(tmp_path):
    for marker in publish.ZARR_METADATA:
        folder = tmp_path / marker.strip(".")
        folder.mkdir()
        (folder / marker).write_text("{}")
        assert publish.is_zarr_store(folder)
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "sub").mkdir()
    (tmp_path / "plain" / "sub" / "zarr.json").write_text("{}")
    assert not publish.is_zarr_store(tmp_path / "plain")


def test_temporary_names_sit_beside_the_target_and_name_this_process(tmp_path):
    target = tmp_path / "out.zarr"
    a, b = publish.temp_path(target), publish.temp_path(target)
    assert a.parent == b.parent == tmp_path and a != b
    assert a.name.startswith(f".out.zarr.tmp-{os.getpid()}-")
    assert publish._leftover_pattern(target).fullmatch(a.name).group(1, 2) == ("tmp", str(os.getpid()))
    assert publish._leftover_pattern(target).fullmatch(".out.zarr.old-12-3").group(1, 2) == ("old", "12")
    assert publish._leftover_pattern(target).fullmatch(".other.zarr.tmp-12-3") is None


def test_same_place_sees_through_symlinks_dotdot_nesting_and_hard_links(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "a")
    assert publish.same_place(tmp_path / "link", tmp_path / "a")
    assert publish.same_place(tmp_path / "a" / ".." / "a", tmp_path / "a")
    assert publish.same_place(tmp_path / "a" / "inner", tmp_path / "link")
    (tmp_path / "f").write_text("x")
    os.link(tmp_path / "f", tmp_path / "g")
    assert publish.same_place(tmp_path / "f", tmp_path / "g")
    assert not publish.same_place(tmp_path / "a", tmp_path / "f")
    assert not publish.same_place(tmp_path / "missing1", tmp_path / "missing2")


def test_a_process_is_alive_while_it_runs_and_dead_once_reaped_or_a_zombie():
    assert publish.process_alive(os.getpid())
    assert not publish.process_alive(dead_pid())
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while Path(f"/proc/{zombie.pid}/stat").read_bytes().rsplit(b")", 1)[-1].split()[0] != b"Z":
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.01)
    try:
        assert not publish.process_alive(zombie.pid)  # exited, not yet reaped
    finally:
        zombie.wait()


def test_install_puts_a_file_or_a_new_store_in_place(tmp_path):
    target = tmp_path / "out.npy"
    temp = publish.temp_path(target)
    temp.write_bytes(b"new")
    publish.install(temp, target)
    assert target.read_bytes() == b"new" and not temp.exists()
    temp = publish.temp_path(target)
    temp.write_bytes(b"newer")
    publish.install(temp, target)  # over an existing file
    assert target.read_bytes() == b"newer" and list(tmp_path.iterdir()) == [target]


def test_install_swaps_a_store_over_an_existing_one_and_leaves_nothing_beside(tmp_path):
    target = zarr_store(tmp_path / "out.zarr", "old")
    temp = zarr_store(publish.temp_path(target), "new")
    publish.install(temp, target)
    assert (target / "c" / "0").read_text() == "new" and list(tmp_path.iterdir()) == [target]


def test_install_renames_aside_where_names_cannot_be_swapped(tmp_path, monkeypatch):
    monkeypatch.setattr(publish, "_exchange", lambda a, b: False)  # an OS without renameat2
    target = zarr_store(tmp_path / "out.zarr", "old")
    publish.install(zarr_store(publish.temp_path(target), "new"), target)
    assert (target / "c" / "0").read_text() == "new" and list(tmp_path.iterdir()) == [target]


def test_exchange_swaps_two_names_atomically(tmp_path):
    (tmp_path / "a").write_text("A")
    (tmp_path / "b").mkdir()
    assert publish._exchange(tmp_path / "a", tmp_path / "b")
    assert (tmp_path / "b").read_text() == "A" and (tmp_path / "a").is_dir()
    with pytest.raises(OSError, match=r"cannot swap .*missing.* and .*: No such file or directory"):
        publish._exchange(tmp_path / "missing", tmp_path / "b")


def test_leftovers_of_dead_writers_are_removed_or_restored_and_live_ones_kept(tmp_path):
    target = tmp_path / "out.zarr"
    dead, alive = dead_pid(), os.getpid()
    stale = zarr_store(tmp_path / f".out.zarr.tmp-{dead}-0", "half")
    old = zarr_store(tmp_path / f".out.zarr.old-{dead}-1", "previous")
    running = zarr_store(tmp_path / f".out.zarr.tmp-{alive}-2", "being written")
    empty = tmp_path / f".out.zarr.tmp-{dead}"
    empty.mkdir()
    done = publish.clean_leftovers(target)
    assert sorted(done) == sorted([stale, old, empty])
    assert (target / "c" / "0").read_text() == "previous"  # renamed back: nothing was at the target
    assert running.exists() and not stale.exists() and not empty.exists()


def test_a_leftover_named_after_a_pid_a_later_process_reuses_is_cleaned(tmp_path):
    later = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        reused = zarr_store(tmp_path / f".out.zarr.tmp-{later.pid}-0", "half")
        running = zarr_store(tmp_path / f".out.zarr.tmp-{later.pid}-1", "being written")  # changed now
        hour_ago = time.time() - 3600  # last changed long before `later` started: not its writer
        os.utime(reused, (hour_ago, hour_ago))
        assert publish.process_start(later.pid) > hour_ago
        assert publish.clean_leftovers(tmp_path / "out.zarr") == [reused]
        assert running.exists() and not reused.exists()
    finally:
        later.kill()
        later.wait()


def test_an_old_copy_is_deleted_when_the_target_is_there_and_foreign_things_are_left(tmp_path):
    target = zarr_store(tmp_path / "out.zarr", "current")
    dead = dead_pid()
    old = zarr_store(tmp_path / f".out.zarr.old-{dead}-0", "previous")
    foreign = tmp_path / f".out.zarr.tmp-{dead}-1"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("not a zarr store: not ours")
    link = tmp_path / f".out.zarr.tmp-{dead}-2"
    link.symlink_to(target)
    assert publish.clean_leftovers(target) == [old]
    assert (target / "c" / "0").read_text() == "current" and foreign.exists() and link.is_symlink()
    assert publish.clean_leftovers(tmp_path / "no" / "folder") == []


KILLED_WRITING_METADATA = """
import os, signal, sys
from pathlib import Path
from zarr.storage._local import _atomic_write
folder = Path(sys.argv[1]) / f".out.zarr.tmp-{os.getpid()}-0"
folder.mkdir()
with _atomic_write(folder / sys.argv[2], "wb") as f:  # zarr's own write of a metadata file
    f.write(b'{"zarr_format": 3, "node_type": "arr')
    f.flush()
    os.kill(os.getpid(), signal.SIGKILL)  # killed before zarr renames it into place
"""


@pytest.mark.parametrize("metadata", ["zarr.json", ".zarray"])
def test_a_writer_killed_while_zarr_wrote_its_first_metadata_leaves_what_the_next_cleans(tmp_path, metadata):
    killed = subprocess.run([sys.executable, "-c", KILLED_WRITING_METADATA, str(tmp_path), metadata])
    assert killed.returncode == -9
    (left,) = tmp_path.iterdir()
    assert [e.name.endswith(".partial") for e in left.iterdir()] == [True]  # zarr's temporary name
    assert publish.clean_leftovers(tmp_path / "out.zarr") == [left]
    assert list(tmp_path.iterdir()) == []


def test_a_folder_of_other_partial_files_is_not_ours(tmp_path):
    dead = dead_pid()
    foreign = tmp_path / f".out.zarr.tmp-{dead}-0"
    foreign.mkdir()
    (foreign / "notes.0123456789abcdef0123456789abcdef.partial").write_text("x")
    (tmp_path / f".out.zarr.tmp-{dead}-1").mkdir()
    (tmp_path / f".out.zarr.tmp-{dead}-1" / f"zarr.{'0' * 32}.partial").mkdir()  # a folder, not zarr's file
    assert publish.clean_leftovers(tmp_path / "out.zarr") == []


def test_discard_own_removes_only_this_processs_temporaries(tmp_path):
    target = tmp_path / "out.npy"
    mine = publish.temp_path(target)
    mine.write_bytes(b"x")
    other = tmp_path / f".out.npy.tmp-{dead_pid()}-0"
    other.write_bytes(b"y")
    publish.discard_own(target)
    assert not mine.exists() and other.exists()


def test_remove_takes_files_trees_and_nothing_quietly(tmp_path):
    store = zarr_store(tmp_path / "s.zarr", "v")
    publish.remove(store)
    (tmp_path / "f").write_text("x")
    publish.remove(tmp_path / "f")
    publish.remove(tmp_path / "never")
    assert list(tmp_path.iterdir()) == []
