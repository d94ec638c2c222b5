"""Writing and reading the zarr arrays behind `Array.to_zarr` and `lf.from_zarr`.

`write` creates the array with the incomplete marker in its first metadata (`lazyfuel.completion`),
a crc32c on every stored chunk, and every chunk written even where it equals the fill value (so a
missing chunk is always damage); each dask block writes exactly one zarr chunk and returns the
crc32c of its values, and one last task records them with the complete marker
(`lazyfuel.integrity`). A local path (a folder, `file://`) is written under a temporary name
beside it and renamed into place by that last task (`lazyfuel.publish`): an existing store stays
until the new one replaces it, and a folder that is not a zarr store is never replaced. Other
stores (fsspec URLs, store objects) are written in place, guarded by the marker alone.

`read` refuses an incomplete array and reads a complete one through `integrity.VerifiedChunks`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
from dask.base import tokenize

from lazyfuel import completion, integrity, publish

_REFUSED = {"return_stored": "the store is marked complete after its last chunk; read the result back with "
                             "lf.from_zarr",
            "region": "lazyfuel writes whole arrays (checksummed and published at once)",
            "mode": "pass overwrite=True to replace an existing store",
            "chunks": "the store's chunks are the array's: rechunk it first (x.rechunk is dask's; "
                      "lf.from_array(..., chunks=) for a new source)",
            "shards": "each block is written and checked as one chunk file"}


def local_path(url: Any, storage_options: dict | None) -> Path | None:
    """The real local path `url` names (symlinks and `..` resolved), or None for other stores."""
    if storage_options or not isinstance(url, (str, os.PathLike)):
        return None
    text = os.fspath(url)
    if isinstance(text, bytes) or ("://" in text and not text.startswith("file://")):
        return None
    return publish.real_path(text.removeprefix("file://"))


def write(arr: da.Array, url: Any, component: str | None, overwrite: bool, compute: bool,
          kwargs: dict[str, Any], slabs: tuple[int, Iterable[tuple[int, da.Array]]] | None = None) -> Any:
    """Store `arr` (regular chunks) as a zarr array; the dask collection, or None once computed.

    `slabs` (axis, (first index along it, dask array)...): the array cut along that axis into
    slabs of whole chunks (`graph.passes`), each lowered, computed and written after the one
    before (`compute` only), the chunks' checksums gathered from each; the store is published
    after the last, as a whole. `arr` then only gives the shape, dtype and chunks."""
    import zarr

    if isinstance(url, (zarr.Array, zarr.Group)):
        raise TypeError(f"to_zarr takes a path, URL or zarr store, not a zarr {type(url).__name__}: lazyfuel "
                        "creates the array itself (checksummed, marked incomplete until written); to write "
                        "into an existing zarr array use dask's da.store(x.to_dask(), z)")
    for name, why in _REFUSED.items():
        if name in kwargs:
            raise TypeError(f"to_zarr: {name}= is not supported ({why})")
    arr = _native(arr)
    kwargs = dict(kwargs)
    options = kwargs.pop("storage_options", None)
    root = local_path(url, options)
    temp = None
    if root is not None:
        publish.clean_leftovers(root)
        _check_local_target(root, component, overwrite)
        temp = publish.temp_path(root)
        root.parent.mkdir(parents=True, exist_ok=True)
        z = _create(str(temp), component, arr, False, None, kwargs)
    else:
        z = _create(url, component, arr, overwrite or _incomplete(url, component, options), options, kwargs)
    name = tokenize("lazyfuel-to-zarr", arr.name, str(url), component, str(temp))
    crcs = _crcs(arr, z, (0,) * arr.ndim, name)
    done = da.blockwise(_finish, (), crcs, tuple(range(arr.ndim)), z=z, temp=temp, root=root,
                        component=component, concatenate=True, dtype=bool, meta=np.empty((), bool),
                        name=f"lazyfuel-complete-{name}")
    if not compute:
        return done
    try:
        if slabs is None:
            done.compute()
        else:
            axis, parts = slabs
            grids = [_crcs(_native(part), z, tuple(start if a == axis else 0 for a in range(arr.ndim)),
                           name).compute() for start, part in parts]
            _finish(np.concatenate(grids, axis=axis), z, temp, root, component)
    except BaseException:
        if temp is not None:
            publish.remove(temp)
        raise
    return None


def _native(arr: da.Array) -> da.Array:
    """`arr` in native byte order: zarr keeps native order, and the checksums are of the bytes kept."""
    return arr if arr.dtype.isnative else arr.astype(arr.dtype.newbyteorder("="))


def _check_local_target(root: Path, component: str | None, overwrite: bool) -> None:
    """FileExistsError unless writing `component` of the store at `root` may replace what is there."""
    target = root / component if component else root
    if os.path.lexists(root) and not (root.is_dir() and publish.is_zarr_store(root)):
        raise FileExistsError(f"to_zarr: {root} exists and is not a zarr store (no zarr.json, .zarray or "
                              ".zgroup at its root); lazyfuel never deletes or writes into it: remove it "
                              "yourself or write elsewhere")
    if component and os.path.lexists(target) and not publish.is_zarr_store(target):
        raise FileExistsError(f"to_zarr: {target} exists and is not a zarr array; lazyfuel never replaces it")
    if os.path.lexists(target) and not overwrite and not _incomplete(str(root), component, None):
        raise FileExistsError(f"to_zarr: {target} already holds a zarr store; pass overwrite=True to replace "
                              "it (the old one stays in place until the new one is complete)")


def _incomplete(url: Any, component: str | None, options: dict | None) -> bool:
    """Whether `url` holds an array lazyfuel began and did not finish (safe to replace)."""
    import zarr

    extra = {"storage_options": options} if options else {}
    try:
        z = zarr.open_array(store=url, path=component, mode="r", **extra)
    except Exception:  # nothing there, a group, unreadable metadata: not ours to replace silently
        return False
    found = completion.marker(z)
    return found is not None and found.get("complete") is False


def _create(store: Any, component: str | None, arr: da.Array, overwrite: bool, options: dict | None,
            kwargs: dict[str, Any]) -> Any:
    """The new zarr array, marked incomplete in its first metadata, every chunk checksummed."""
    import numcodecs
    import zarr
    from zarr.codecs import Crc32cCodec, ZstdCodec

    zarr_format = kwargs.pop("zarr_format", 3)
    attributes = {**kwargs.pop("attributes", {}), completion.ATTRIBUTE: completion.INCOMPLETE}
    config = {**kwargs.pop("config", {}), "write_empty_chunks": True}
    compressors = kwargs.pop("compressors", "auto")
    filters = kwargs.pop("filters", "auto")
    if zarr_format == 3:
        given = [ZstdCodec(level=0)] if compressors == "auto" else _as_list(compressors)
        compressors = [*given, *([] if any(isinstance(c, Crc32cCodec) for c in given) else [Crc32cCodec()])]
    else:
        given = [] if filters in ("auto", None) else _as_list(filters)
        has_crc = any(isinstance(f, numcodecs.CRC32C) for f in given)
        filters = [*given, *([] if has_crc else [numcodecs.CRC32C()])]
    extra = {"storage_options": options} if options else {}
    try:
        return zarr.create_array(store=store, name=component, shape=arr.shape, dtype=arr.dtype,
                                 chunks=tuple(max(c[0], 1) for c in arr.chunks), compressors=compressors,
                                 filters=filters, zarr_format=zarr_format, attributes=attributes,
                                 config=config, overwrite=overwrite, **extra, **kwargs)
    except (zarr.errors.ContainsArrayError, zarr.errors.ContainsGroupError) as err:
        raise FileExistsError(f"to_zarr: {store}{f' (component {component!r})' if component else ''} already "
                              "holds a zarr array or group; pass overwrite=True to replace it") from err


def _as_list(codecs: Any) -> list[Any]:
    return [] if codecs is None else list(codecs) if isinstance(codecs, (list, tuple)) else [codecs]


def _crcs(arr: da.Array, z: Any, offset: tuple[int, ...], name: str) -> da.Array:
    """The tasks writing each block of `arr` (the part of `z` from `offset` on): their crc32c."""
    return arr.map_blocks(_write_block, z=z, offset=offset, name=f"lazyfuel-store-{name}-{arr.name}",
                          dtype=np.uint32, chunks=tuple((1,) * len(c) for c in arr.chunks),
                          meta=np.empty((0,) * arr.ndim, np.uint32))


def _write_block(block: np.ndarray, z: Any, offset: tuple[int, ...], block_info: dict | None = None
                 ) -> np.ndarray:
    """Write one block (exactly one zarr chunk, at `offset` plus its place in its array); the
    crc32c of its values, one per block. A whole raw chunk of a local store is written as its
    file straight from the block (`_raw_chunk_file`), else through zarr."""
    assert block_info is not None
    location = block_info[0]["array-location"]
    region = tuple(slice(o + start, o + stop) for o, (start, stop) in zip(offset, location))
    values = np.asarray(block, dtype=z.dtype, order="C")
    crc = integrity.values_crc(values)
    if values.size:
        file = _raw_chunk_file(z, region, values.dtype)
        if file is None:
            z[region] = values
        else:
            _write_file(file, [values.reshape(-1).view(np.uint8), crc.to_bytes(4, "little")])
    return np.full((1,) * block.ndim, crc, np.uint32)


def _raw_chunk_file(z: Any, region: tuple[slice, ...], dtype: np.dtype) -> str | None:
    """The file of the chunk `region` is when writing it needs no codec of zarr's: a v3 array of a
    local store whose chunks are their raw bytes in `dtype`'s byte order followed by their
    crc32c (what `compressors=None` makes here: `bytes` then `crc32c`), `region` one whole
    chunk; else None. Such a chunk file is the values' bytes and then their crc32c, little-endian
    (zarr's `crc32c` codec), so it is written in one `writev`, without zarr's copies."""
    from lazyfuel.graph.zarr_chunks import _local_file, _trailer, raw_dtype

    if z.metadata.zarr_format != 3 or _trailer(z) != 4 or raw_dtype(z) != dtype:
        return None
    chunks = tuple(z.chunks)
    if any(r.start % c or r.stop - r.start != c for r, c in zip(region, chunks)):
        return None  # an edge chunk (zarr pads it) or not one chunk
    coords = tuple(r.start // c for r, c in zip(region, chunks))
    return _local_file(z.async_array.store_path / z.metadata.encode_chunk_key(coords))


def _write_file(file: str, parts: list[Any]) -> None:
    """Write `parts` (buffers) one after another as the whole of `file`, its folders made."""
    os.makedirs(os.path.dirname(file), exist_ok=True)
    fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        views = [memoryview(p).cast("B") for p in parts]
        while views:
            done = os.writev(fd, views)
            while views and done >= len(views[0]):
                done -= len(views[0])
                views.pop(0)
            if views:
                views[0] = views[0][done:]
    finally:
        os.close(fd)


def _finish(crcs: np.ndarray, z: Any, temp: Path | None, root: Path | None, component: str | None
            ) -> np.ndarray:
    """After every block: record the chunks' crc32c with the complete marker, then publish."""
    listed = np.asarray(crcs, np.uint32).reshape(-1).tolist() if z.size else []
    marker = completion.complete_marker(tuple(z.shape), z.dtype, tuple(z.chunks), listed)
    z.attrs[completion.ATTRIBUTE] = marker
    if temp is not None and root is not None:
        _publish(temp, root, component)
    return np.ones((), bool)


def _publish(temp: Path, root: Path, component: str | None) -> None:
    """Move the finished temporary store (or its component) to `root`."""
    if not component or not root.exists():
        publish.install(temp, root)
        return
    import zarr

    parent = component.rstrip("/").rpartition("/")[0]
    if parent:
        zarr.open_group(str(root), mode="a").require_group(parent)
    publish.install(temp / component, root / component)
    publish.remove(temp)


def open_checked(url: Any, component: str | None = None) -> tuple[Any, Any]:
    """The zarr array at `url` and what to read it through (VerifiedChunks for arrays lazyfuel
    wrote with checksums, else the zarr array); IncompleteStoreError, DamagedStoreError."""
    import zarr

    z = url if isinstance(url, zarr.Array) else zarr.open_array(store=url, path=component, mode="r")
    where = f"{url}" + (f" (component {component!r})" if component else "")
    found = completion.check_complete(z, where)
    if found is None or "crc32c" not in found:
        return z, z
    crcs = integrity.check_metadata(z, found, where)
    return z, integrity.VerifiedChunks(z, crcs, where)


def read(url: Any, component: str | None = None) -> da.Array:
    """A dask array over the zarr array at `url`, checked as `open_checked` says."""
    return verified(url, component, *open_checked(url, component))


def verified(url: Any, component: str | None, z: Any, reader: Any) -> da.Array:
    """A dask array over `z` read through `reader` (what `open_checked` returned for `url`)."""
    if reader is z:
        return da.from_zarr(z)
    name = "from-zarr-" + tokenize(str(url), component, np.asarray(reader.crcs, np.uint32), z.shape,
                                   str(z.dtype), z.chunks)
    return da.from_array(reader, chunks=z.chunks, name=name, asarray=True, fancy=False,
                         meta=np.empty((0,) * z.ndim, z.dtype))
