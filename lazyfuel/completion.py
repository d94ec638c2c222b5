"""Completion markers: a zarr array lazyfuel writes is never read as complete before it is.

`Array.to_zarr` creates its array with the attribute `lazyfuel: {complete: false}` in the same
metadata write that creates it (`INCOMPLETE`), so no reader ever sees the array without the
marker, and its last task replaces the marker with `complete_marker`: `complete: true` plus what
was written (shape, dtype, chunks, chunk count, the crc32c of every chunk's values; see
`lazyfuel.integrity`). A run that fails part way leaves the marker false, and `check_complete`
(called by `lf.from_zarr`) refuses such an array with `IncompleteStoreError` naming it. Arrays
without the attribute (written by other tools) read as they always did; other readers see the
attribute and may check it themselves.
"""

from __future__ import annotations

from typing import Any

import numpy as np

ATTRIBUTE = "lazyfuel"
INCOMPLETE: dict[str, Any] = {"complete": False}


class IncompleteStoreError(ValueError):
    """A zarr array lazyfuel began writing but did not finish (its run failed or is running)."""


def complete_marker(shape: tuple[int, ...], dtype: np.dtype, chunks: tuple[int, ...],
                    crc32c: list[int]) -> dict[str, Any]:
    """The attribute of a finished array: complete, and what was written."""
    return {"complete": True, "shape": list(shape), "dtype": np.dtype(dtype).str, "chunks": list(chunks),
            "chunk_count": len(crc32c), "crc32c": [int(c) for c in crc32c]}


def marker(z: Any) -> dict[str, Any] | None:
    """The lazyfuel attribute of the zarr array `z` (None if it has none)."""
    found = z.attrs.get(ATTRIBUTE)
    return found if isinstance(found, dict) else None


def check_complete(z: Any, where: str) -> dict[str, Any] | None:
    """IncompleteStoreError when the zarr array `z` (at `where`) says lazyfuel has not finished
    writing it; else its marker (None for an array lazyfuel did not write)."""
    found = marker(z)
    if found is not None and found.get("complete") is not True:
        raise IncompleteStoreError(
            f"the zarr array at {where} is incomplete: lazyfuel began writing it and the run did not "
            f"finish (attribute {ATTRIBUTE}.complete is false: the run failed or is still running); "
            "compute it again, or open it with zarr directly to read what was written")
    return found
