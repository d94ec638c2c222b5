"""Graph outputs: what to compute for each (a store into zarr or .npy, or the array itself) and
the summary printed for it afterwards: shape, dtype, size and a checksum.

A failed run never leaves an output that reads as complete: a zarr output carries
`Array.to_zarr`'s completion marker (`lazyfuel.completion`; `lf.from_zarr` refuses it until the
last chunk is in), and a .npy output is written to `.NAME.partial` beside its path and moved
there once every block is in (a file at the path is removed when the run starts).

The checksum is the first 16 hex digits of the sha256 of the output's bytes in C order (numpy's
`tobytes()`), so it does not depend on chunks, scheduler or backend: the same graph gives the same
checksum on lavapipe, a GPU or the numpy backend. Stored outputs are hashed by reading them back
in row blocks, so an output larger than memory is never held whole.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np

import lazyfuel as lf
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


def _is_zarr_store(path: Path) -> bool:
    return any((path / marker).exists() for marker in ("zarr.json", ".zarray", ".zgroup"))


def target(spec: OutputSpec, arr: lf.Array, graph_path: str) -> Any:
    """The dask collection whose computation produces this output (a store, or the array).

    An existing zarr store at the path is replaced; anything else there is refused (GraphError),
    so a mistyped path never deletes a folder that is not a store.
    """
    if spec.path is not None and spec.path.exists():
        replaceable = _is_zarr_store(spec.path) if spec.kind == "zarr" else spec.path.is_file()
        if not replaceable:
            what = "a folder that is not a zarr store" if spec.path.is_dir() else "not a file"
            raise GraphError(f"{spec.kind}: {spec.path} exists and is {what}; refusing to overwrite it",
                             graph_path, spec.line, f"output {spec.value!r}")
    if spec.kind == "zarr":
        assert spec.path is not None
        shutil.rmtree(spec.path, ignore_errors=True)
        spec.path.parent.mkdir(parents=True, exist_ok=True)
        return arr.to_zarr(spec.path, compute=False)
    if spec.kind == "npy":
        assert spec.path is not None
        spec.path.parent.mkdir(parents=True, exist_ok=True)
        spec.path.unlink(missing_ok=True)  # an earlier run's file must not pass for this run's
        partial = partial_path(spec.path)
        np.lib.format.open_memmap(partial, mode="w+", dtype=arr.dtype, shape=arr.shape).flush()
        stored = da.store(arr.to_dask(), NpyTarget(str(partial), arr.shape, arr.dtype), lock=False,
                          compute=False)
        return dask.delayed(_publish, pure=False)(stored, str(partial), str(spec.path))
    return arr.to_dask()


def partial_path(path: Path) -> Path:
    """Where a .npy output is written until its last block is in: `.NAME.partial` beside it."""
    return path.with_name(f".{path.name}.partial")


def _publish(stored: Any, partial: str, path: str) -> None:
    """Move a finished .npy output to its path (atomic in one directory)."""
    os.replace(partial, path)


def summarise(spec: OutputSpec, arr: lf.Array, computed: Any) -> Summary:
    """The summary of an output once its target has run (`computed` is its result)."""
    if spec.kind == "zarr":
        import zarr

        digest = _digest_rows(zarr.open_array(str(spec.path), mode="r"))
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
