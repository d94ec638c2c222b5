"""How a zarr array's chunks lie in its store: the dtype of raw chunk bytes (`raw_dtype`, a crc32c
trailer allowed), raw inner chunks of a shard, the one compressor a windowed decode can run,
where each touched row lies (`_row_offsets`), the local file of a chunk, the chunk shape a
source is cut into (`regular_chunks`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np


def _bytes_dtype(codecs: Sequence[Any], dtype: np.dtype) -> np.dtype | None:
    """`dtype` in the byte order of `codecs` when they are the `bytes` codec alone, else None."""
    from zarr.codecs import BytesCodec

    if len(codecs) != 1 or not isinstance(codecs[0], BytesCodec):
        return None
    endian = getattr(codecs[0].endian, "value", codecs[0].endian)
    return dtype if endian is None else dtype.newbyteorder("<" if endian == "little" else ">")


def _trailer(arr: Any) -> int:
    """Bytes after a raw chunk's values: 4 when each chunk ends in its crc32c (what lazyfuel
    writes with `compressors=None`: v3's `crc32c` codec, v2's CRC32C filter), else 0."""
    import numcodecs
    from zarr.codecs import Crc32cCodec

    meta = arr.metadata
    if meta.zarr_format == 2:
        return 4 if len(meta.filters or ()) == 1 and isinstance(meta.filters[0], numcodecs.CRC32C) else 0
    codecs = tuple(meta.codecs)
    return 4 if len(codecs) == 2 and isinstance(codecs[1], Crc32cCodec) else 0


def _raw_bytes_dtype(codecs: Sequence[Any], dtype: np.dtype) -> np.dtype | None:
    """`_bytes_dtype` of v3 `codecs`, a `crc32c` codec after the `bytes` codec allowed."""
    from zarr.codecs import Crc32cCodec

    if len(codecs) == 2 and isinstance(codecs[1], Crc32cCodec):
        codecs = codecs[:1]
    return _bytes_dtype(codecs, dtype)


def raw_dtype(arr: Any) -> np.dtype | None:
    """The dtype of a zarr array's chunk bytes (byte order included) when each chunk is stored as
    its raw C-order bytes (maybe followed by a crc32c, `_trailer`); None otherwise (compressed,
    filtered, sharded, F order)."""
    meta = arr.metadata
    dtype = np.dtype(arr.dtype)
    if meta.zarr_format == 2:
        raw = meta.compressor is None and (not meta.filters or _trailer(arr)) and meta.order == "C"
        return dtype if raw else None
    return _raw_bytes_dtype(tuple(meta.codecs), dtype)


def _raw_shards(arr: Any) -> tuple[Any, np.dtype] | None:
    """(the sharding codec, the dtype of its inner chunks' bytes) when `arr` is sharded into inner
    chunks stored raw that span the whole shard on every axis but the first; else None."""
    from zarr.codecs import ShardingCodec

    meta = arr.metadata
    if meta.zarr_format != 3 or len(meta.codecs) != 1 or not isinstance(meta.codecs[0], ShardingCodec):
        return None
    codec = meta.codecs[0]
    dtype = _bytes_dtype(tuple(codec.codecs), np.dtype(arr.dtype))
    if dtype is None or tuple(codec.chunk_shape[1:]) != tuple(arr.shards[1:]):
        return None
    return codec, dtype


def regular_chunks(arr: Any) -> tuple[int, ...]:
    """The chunk shape a source over `arr` is cut into: the shards of a sharded array (its inner
    chunks are read through zarr's partial decode), else its chunks."""
    return tuple(getattr(arr, "shards", None) or arr.chunks)


def _one_compressor(arr: Any) -> tuple[Any, np.dtype] | None:
    """(a numcodecs codec that decodes a chunk's bytes, the dtype of the decoded bytes) when each
    chunk is one compressor's output of its C-order bytes (v2: a compressor, no filters; v3: the
    `bytes` codec and one of zstd, blosc, gzip); else None."""
    import numcodecs
    from zarr.codecs import BloscCodec, GzipCodec, ZstdCodec

    meta = arr.metadata
    if meta.zarr_format == 2:
        ok = meta.compressor is not None and not meta.filters and meta.order == "C"
        return (meta.compressor, np.dtype(arr.dtype)) if ok else None
    codecs = tuple(meta.codecs)
    kinds = {ZstdCodec: numcodecs.Zstd, BloscCodec: numcodecs.Blosc, GzipCodec: numcodecs.GZip}
    if len(codecs) != 2 or type(codecs[1]) not in kinds:
        return None
    dtype = _bytes_dtype(codecs[:1], np.dtype(arr.dtype))
    return None if dtype is None else (kinds[type(codecs[1])](), dtype)


MISSING = np.int64(-1)


def _row_offsets(arr: Any, chunk: tuple[int, ...], rows: np.ndarray
                 ) -> tuple[Any, np.ndarray, np.dtype, tuple[int, ...]] | None:
    """Where each row of chunk `chunk` (a shard of a sharded array) lies in the store: the store
    path, each row's byte offset (`MISSING` for rows of chunks never written), the stored dtype
    and the stored shape of one row; None when the rows are not stored as raw bytes."""
    from zarr.core.sync import sync

    store_path = arr.async_array.store_path / arr.metadata.encode_chunk_key(chunk)
    dtype = raw_dtype(arr)
    if dtype is not None:
        full = tuple(arr.chunks[1:])  # stored chunks are whole (edge chunks padded)
        return store_path, rows * (math.prod(full) * dtype.itemsize), dtype, full
    sharded = _raw_shards(arr)
    if sharded is None:
        return None
    codec, dtype = sharded
    full = tuple(arr.shards[1:])
    inner_rows = codec.chunk_shape[0]
    per_shard = tuple(s // c for s, c in zip(arr.shards, codec.chunk_shape))
    index = sync(codec._load_shard_index_maybe(store_path, per_shard))  # zarr's own reader of it
    if index is None:
        return store_path, np.full(rows.shape, MISSING), dtype, full
    starts = index.offsets_and_lengths.reshape(per_shard[0], -1, 2)[:, 0, 0]
    unwritten = starts == np.iinfo(np.uint64).max
    starts = np.where(unwritten, 0, starts).astype(np.int64)
    inner = rows // inner_rows
    offsets = starts[inner] + (rows - inner * inner_rows) * (math.prod(full) * dtype.itemsize)
    return store_path, np.where(unwritten[inner], MISSING, offsets), dtype, full


def _local_file(store_path: Any) -> str | None:
    """The file of `store_path` when its store is a local directory (zarr's `LocalStore`)."""
    from zarr.storage import LocalStore

    store = store_path.store
    return os.path.join(str(store.root), store_path.path) if type(store) is LocalStore else None
