"""Completion markers: a zarr array lazyfuel writes is never read as complete before it is.

`Array.to_zarr` marks the array it creates with the attribute `lazyfuel: {complete: false}`
before any chunk is written (`mark_incomplete`), and `finish` adds the task that sets
`complete: true` after every chunk's store task has succeeded. A run that fails part way (an
IndexError from lazy indices, a device fault the retries could not absorb) leaves the marker
false, and `check_complete` (called by `lf.from_zarr`) refuses such an array with
`IncompleteStoreError` naming it. Arrays without the attribute (written by other tools) read as
they always did; other readers see the attribute and may check it themselves.
"""

from __future__ import annotations

from typing import Any

ATTRIBUTE = "lazyfuel"


class IncompleteStoreError(ValueError):
    """A zarr array lazyfuel began writing but did not finish (its run failed or is running)."""


def _open(url: Any, component: str | None, mode: str, storage_options: dict | None = None) -> Any:
    import zarr

    if isinstance(url, zarr.Array):
        return url
    extra = {"storage_options": storage_options} if storage_options else {}
    return zarr.open_array(store=url, path=component, mode=mode, **extra)


def _set(url: Any, component: str | None, complete: bool, storage_options: dict | None) -> None:
    z = _open(url, component, "r+", storage_options)
    z.attrs[ATTRIBUTE] = {"complete": complete}


def mark_incomplete(url: Any, component: str | None = None, storage_options: dict | None = None) -> None:
    """Mark the zarr array at `url` (`component` in a group) as being written by lazyfuel."""
    _set(url, component, False, storage_options)


def finish(stored: Any, url: Any, component: str | None = None,
           storage_options: dict | None = None) -> Any:
    """A dask collection that marks the array complete once `stored` (what `da.store(…,
    compute=False)` returns) has run: one task over every store task. Recent dask returns an
    Array, kept an Array (wrapping it in a Delayed would compute it as one, unfused: every
    intermediate held); older dask returns a Delayed."""
    import dask
    import dask.array as da
    import numpy as np

    if not isinstance(stored, da.Array):
        return dask.delayed(_after, pure=False)(stored, url, component, storage_options)
    index = tuple(range(stored.ndim))
    return da.blockwise(_after, (), stored, index, url=url, component=component,
                        storage_options=storage_options, concatenate=False, dtype=bool,
                        meta=np.empty((), bool), token="lazyfuel-complete")


def _after(stored: Any, url: Any, component: str | None, storage_options: dict | None) -> Any:
    """Mark complete; `stored` (the store tasks' results) only orders it after them."""
    import numpy as np

    _set(url, component, True, storage_options)
    return np.ones((), bool)


def check_complete(url: Any, component: str | None = None) -> None:
    """IncompleteStoreError when the zarr array at `url` says lazyfuel has not finished writing it;
    nothing for a complete array or one lazyfuel did not write."""
    z = _open(url, component, "r")
    marker = z.attrs.get(ATTRIBUTE)
    if isinstance(marker, dict) and marker.get("complete") is False:
        where = f"{url}" + (f" (component {component!r})" if component else "")
        raise IncompleteStoreError(
            f"the zarr array at {where} is incomplete: lazyfuel began writing it and the run did not "
            f"finish (attribute {ATTRIBUTE}.complete is false: the run failed or is still running); "
            "compute it again, or open it with zarr directly to read what was written")
