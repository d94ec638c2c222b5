"""Publishing local outputs whole: write beside the target, rename into place, clean what kills left.

A zarr store or `.npy` file lazyfuel writes to a local path is first written under a temporary
name in the same folder, `.NAME.tmp-PID-N` (PID: the writing process; N: a counter of this
process), and moved to `NAME` by a rename once it is complete. A reader therefore sees the old
output or the new one, never a mix or a half. A folder is replaced by swapping the two names in
one `renameat2(RENAME_EXCHANGE)` where the OS and file system have it (Linux), so an existing
output stays at its path until the new one is there; elsewhere the old one is first renamed aside
to `.NAME.old-PID-N`, and a kill between the two renames is repaired by the next writer (it
renames the old output back). A file is replaced by `os.replace` (atomic over an existing file).

`clean_leftovers(target)`, called before every write to `target`, removes the temporary names
and old copies of `target` whose writing process is dead on this machine (a SIGKILL, a power
cut): only names of exactly this form, and only plain files, zarr stores and folders holding no
more than zarr's half-written first metadata (`.partial`).
Names of live processes are left alone (they may still be writing), unless that process started
after the name last changed (a reused pid).
"""

from __future__ import annotations

import ctypes
import errno
import itertools
import os
import re
import shutil
from pathlib import Path

ZARR_METADATA = ("zarr.json", ".zarray", ".zgroup")
_METADATA_BEING_WRITTEN = re.compile(r"(zarr|\.zarray|\.zgroup|\.zattrs)\.[0-9a-f]{32}\.partial")
"""What zarr's local store leaves of metadata it was writing when killed: it writes each file under
`NAME.<uuid hex>.partial` (`zarr.json`: `zarr.<hex>.partial`) and renames it into place."""
_counter = itertools.count()
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def is_zarr_store(path: Path) -> bool:
    """Whether the folder `path` has zarr metadata (v2 or v3) at its root."""
    return any((path / marker).is_file() for marker in ZARR_METADATA)


def real_path(path: str | os.PathLike[str]) -> Path:
    """`path` with symlinks and `..` resolved (what a write there really replaces)."""
    return Path(os.path.realpath(path))


def same_place(a: Path, b: Path) -> bool:
    """Whether `a` and `b` are one file or folder, or one holds the other, once symlinks and `..`
    are resolved; hard links count where both exist (os.path.samefile)."""
    ra, rb = real_path(a), real_path(b)
    if ra == rb or ra in rb.parents or rb in ra.parents:
        return True
    try:
        return os.path.samefile(ra, rb)
    except OSError:
        return False


def temp_path(target: Path) -> Path:
    """A new temporary name beside `target`, unique in this process: `.NAME.tmp-PID-N`."""
    return target.with_name(f".{target.name}.tmp-{os.getpid()}-{next(_counter)}")


def _aside_path(target: Path) -> Path:
    return target.with_name(f".{target.name}.old-{os.getpid()}-{next(_counter)}")


def _leftover_pattern(target: Path) -> re.Pattern[str]:
    return re.compile(rf"\.{re.escape(target.name)}\.(tmp|old)-(\d+)(?:-\d+)?")


def process_alive(pid: int) -> bool:
    """Whether process `pid` runs on this machine (a zombie, killed but not yet reaped, is dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except OSError:
        return True


def process_start(pid: int) -> float | None:
    """When process `pid` started (seconds since the epoch, to about a second), or None where
    /proc does not say."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            ticks = int(f.read().rsplit(b")", 1)[-1].split()[19])
        with open("/proc/stat", "rb") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith(b"btime "))
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def _writer_alive(pid: int, entry: Path) -> bool:
    """Whether the process that named `entry` may still be writing it: `pid` runs and did not
    start after `entry` last changed (a process that started later only reuses the number of a
    dead writer: pids wrap at /proc/sys/kernel/pid_max, 32768 by default)."""
    if not process_alive(pid):
        return False
    started = process_start(pid)
    try:
        changed = entry.lstat().st_mtime
    except FileNotFoundError:
        return False
    return started is None or started <= changed + PID_REUSE_SLACK_S


PID_REUSE_SLACK_S = 2.0
"""Seconds a process may seem to have started after its own temporary name last changed
(/proc/stat's boot time is whole seconds)."""


def clean_leftovers(target: Path) -> list[Path]:
    """Remove what killed writers of `target` left beside it; the paths removed or restored.

    A `.NAME.tmp-PID…` of a dead process is deleted; a `.NAME.old-PID…` (an old output renamed
    aside) is renamed back to `NAME` when nothing is there, else deleted.
    """
    parent = target.parent
    if not parent.is_dir():
        return []
    pattern = _leftover_pattern(target)
    done = []
    for entry in sorted(parent.iterdir()):
        found = pattern.fullmatch(entry.name)
        if found is None or _writer_alive(int(found.group(2)), entry) or not _ours(entry):
            continue
        if found.group(1) == "old" and not os.path.lexists(target):
            os.rename(entry, target)
        else:
            remove(entry)
        done.append(entry)
    return done


def discard_own(target: Path) -> None:
    """Remove this process's temporary names for `target` (after a failed run)."""
    mine = re.compile(rf"\.{re.escape(target.name)}\.tmp-{os.getpid()}-\d+")
    if target.parent.is_dir():
        for entry in target.parent.iterdir():
            if mine.fullmatch(entry.name) and _ours(entry):
                remove(entry)


def _ours(entry: Path) -> bool:
    """What a lazyfuel writer leaves: a plain file, a zarr store, or a folder that holds nothing
    but the metadata zarr was writing when the writer was killed (empty, or only zarr's
    `.partial` files of it: a kill while the first `zarr.json` was written)."""
    if entry.is_symlink():
        return False
    if entry.is_file():
        return True
    return entry.is_dir() and (is_zarr_store(entry) or all(
        _METADATA_BEING_WRITTEN.fullmatch(e.name) and e.is_file(follow_symlinks=False)
        for e in os.scandir(entry)))


def remove(path: Path) -> None:
    """Delete a file or folder tree; nothing if it is gone. A folder's own zarr metadata goes
    last, so a kill part way leaves a zarr store that `clean_leftovers` still knows as its own."""
    if not path.is_dir() or path.is_symlink():
        path.unlink(missing_ok=True)
        return
    for entry in os.scandir(path):
        if entry.name not in ZARR_METADATA:
            shutil.rmtree(entry.path, ignore_errors=True) if entry.is_dir(follow_symlinks=False) \
                else Path(entry.path).unlink(missing_ok=True)
    shutil.rmtree(path, ignore_errors=True)


def install(temp: Path, target: Path) -> None:
    """Move the finished `temp` to `target`, replacing what is there (see the module docstring)."""
    if temp.is_file() or not os.path.lexists(target):
        os.replace(temp, target)
        return
    if _exchange(temp, target):
        remove(temp)  # now the old output
        return
    aside = _aside_path(target)
    os.rename(target, aside)
    os.rename(temp, target)
    remove(aside)


def _exchange(a: Path, b: Path) -> bool:
    """Swap the names `a` and `b` atomically (Linux renameat2); False where it is not available."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    result = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    raise OSError(code, f"cannot swap {a} and {b}: {os.strerror(code)}")
