"""Graph outputs: what to compute for each (a store into zarr or .npy, or the array itself) and
the summary printed for it afterwards: shape, dtype, size and a checksum.

A run never leaves an output that reads as complete before it is, and never destroys an old
one first: a zarr output is `Array.to_zarr`'s (written beside its path, checksummed, renamed into
place when whole; `lazyfuel.zarr_io`), and a .npy output is written to `.NAME.tmp-PID-N` beside
its path and moved over it with `os.replace` once every block is in (`lazyfuel.publish`). What a
killed run left beside an output is cleaned by the next run. An existing output is replaced only
when it is what lazyfuel writes there: a file for .npy, a zarr store carrying lazyfuel's marker
for zarr; anything else is refused (GraphError), so a mistyped path never deletes a folder.

The checksum is the first 16 hex digits of the sha256 of the output's bytes in C order (numpy's
`tobytes()`), so it does not depend on chunks, scheduler or backend: the same graph gives the same
checksum on lavapipe, a GPU or the numpy backend. Stored outputs are hashed by reading them back
in row blocks, so an output larger than memory is never held whole.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np

import lazyfuel as lf
from lazyfuel import completion, publish, zarr_io
from lazyfuel.pipeline.document import GraphError
from lazyfuel.pipeline.spec import OutputSpec

_BLOCK_BYTES = 64 * 2**20


@dataclass(frozen=True)
class Summary:
    """What `lazyfuel run` prints for one output."""

    value: str
    kind: str
    path: Path | None
    shape: tuple[int, ...]
    dtype: np.dtype
    nbytes: int
    checksum: str

    def line(self) -> str:
        where = f" -> {_shown(self.path)}" if self.path is not None else ""
        return (f"{self.value}: shape {self.shape} {self.dtype} ({_size(self.nbytes)}) "
                f"sha256 {self.checksum}{where}")


@dataclass(frozen=True)
class NpyTarget:
    """A `.npy` file `da.store` writes into region by region; picklable (it holds only the path),
    so workers of any scheduler on this machine open the memory map themselves."""

    path: str
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __setitem__(self, region: Any, block: np.ndarray) -> None:
        mm = np.load(self.path, mmap_mode="r+", allow_pickle=False)
        mm[region] = block
        mm.flush()
        del mm


def check(spec: OutputSpec, arr: lf.Array, graph_path: str) -> None:
    """Refuse outputs the target format cannot hold (bfloat16 in zarr or .npy)."""
    if spec.kind != "summary" and arr.dtype.name == "bfloat16":
        raise GraphError(f"{spec.kind} cannot store bfloat16 (numpy has no native bf16); keep "
                         f"{spec.value!r} a summary output", graph_path, spec.line, f"output {spec.value!r}")


def target(spec: OutputSpec, arr: lf.Array, graph_path: str) -> Any:
    """The dask collection whose computation produces this output (a store, or the array)."""
    if spec.path is None:
        return arr.to_dask()
    path = publish.real_path(spec.path)
    publish.clean_leftovers(path)
    refused = _not_replaceable(spec.kind, path)
    if refused:
        raise GraphError(f"{spec.kind}: {spec.path} exists and is {refused}; refusing to overwrite it",
                         graph_path, spec.line, f"output {spec.value!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    if spec.kind == "zarr":
        return arr.to_zarr(path, compute=False, overwrite=True)
    temp = publish.temp_path(path)
    np.lib.format.open_memmap(temp, mode="w+", dtype=arr.dtype, shape=arr.shape).flush()
    stored = da.store(arr.to_dask(), NpyTarget(str(temp), arr.shape, arr.dtype), lock=False, compute=False)
    return dask.delayed(_publish, pure=False)(stored, temp, path)


def _not_replaceable(kind: str, path: Path) -> str:
    """Why what is at `path` must not be replaced by a `kind` output ('' when it may be)."""
    if not os.path.lexists(path):
        return ""
    if kind == "npy":
        return "" if path.is_file() else "not a file"
    if not path.is_dir() or not publish.is_zarr_store(path):
        return "a folder that is not a zarr store" if path.is_dir() else "not a folder"
    import zarr

    try:
        ours = completion.marker(zarr.open_array(str(path), mode="r")) is not None
    except Exception:  # a group, or metadata zarr cannot read
        ours = False
    return "" if ours else "a zarr store lazyfuel did not write (no lazyfuel attribute); delete it yourself"


def discard(specs: list[OutputSpec]) -> None:
    """Remove this process's temporary outputs of `specs` (after a failed run)."""
    for spec in specs:
        if spec.path is not None:
            publish.discard_own(publish.real_path(spec.path))


def _publish(stored: Any, temp: Path, path: Path) -> None:
    """Move a finished .npy output to its path (atomic in one directory)."""
    publish.install(temp, path)


def summarise(spec: OutputSpec, arr: lf.Array, computed: Any) -> Summary:
    """The summary of an output once its target has run (`computed` is its result)."""
    if spec.kind == "zarr":
        digest = _digest_rows(zarr_io.open_checked(str(spec.path))[1])
    elif spec.kind == "npy":
        digest = _digest_rows(np.load(spec.path, mmap_mode="r", allow_pickle=False))
    else:
        digest = checksum(np.asarray(computed))
    return Summary(spec.value, spec.kind, spec.path, tuple(arr.shape), arr.dtype, arr.nbytes, digest)


def checksum(a: np.ndarray) -> str:
    """First 16 hex digits of the sha256 of `a`'s bytes in C order."""
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(a).reshape(-1).view(np.uint8))
    return h.hexdigest()[:16]


def _digest_rows(stored: Any) -> str:
    """`checksum` of an array-like read in blocks of rows (C order makes their bytes consecutive)."""
    h = hashlib.sha256()
    shape = tuple(stored.shape)
    if not shape or 0 in shape:
        h.update(np.ascontiguousarray(stored[...]).reshape(-1).view(np.uint8))
        return h.hexdigest()[:16]
    row_bytes = max(1, int(np.prod(shape[1:], dtype=np.int64)) * np.dtype(stored.dtype).itemsize)
    step = max(1, _BLOCK_BYTES // row_bytes)
    for start in range(0, shape[0], step):
        h.update(np.ascontiguousarray(stored[start:start + step]).reshape(-1).view(np.uint8))
    return h.hexdigest()[:16]


def _shown(path: Path) -> str:
    """`path` relative to the working directory when it is below it."""
    rel = os.path.relpath(path)
    return path.as_posix() if rel.startswith("..") else rel


def _size(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"
