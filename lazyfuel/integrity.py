"""Integrity of the zarr arrays lazyfuel writes: every chunk checked against what was written.

Two checks, one per layer. The stored bytes of each chunk end in a crc32c (zarr v3's `crc32c`
codec after the compressor; numcodecs' CRC32C filter in v2), so zarr itself refuses a truncated
or flipped chunk. And the completion marker (`lazyfuel.completion.complete_marker`) records the
array's shape, dtype and chunks and the crc32c of each chunk's values in C order, so a reader can
tell a chunk file that is missing (zarr would read the fill value), moved or swapped with another
(each is intact, at the wrong place) or from another array, and metadata edited to disagree with
the data. `VerifiedChunks` is the array-like `lf.from_zarr` reads such an array through: each
chunk a read touches is read whole and checked, and any failure is a `DamagedStoreError` naming
the store, the chunk's grid position and its key.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


class DamagedStoreError(ValueError):
    """A zarr array lazyfuel marked complete whose chunks or metadata are not what it wrote."""


def values_crc(a: np.ndarray) -> int:
    """crc32c of `a`'s values in C order (the same for any layout of the same values)."""
    import google_crc32c  # zarr's own dependency; imported here so lazyfuel imports without zarr

    return int(google_crc32c.value(np.ascontiguousarray(a).reshape(-1).view(np.uint8)))


def chunk_grid(shape: tuple[int, ...], chunks: tuple[int, ...]) -> tuple[int, ...]:
    """Chunks per axis of an array of `shape` cut into `chunks`."""
    return tuple(math.ceil(n / c) for n, c in zip(shape, chunks))


def check_metadata(z: Any, marker: dict[str, Any], where: str) -> list[int]:
    """DamagedStoreError unless the array's metadata is what lazyfuel wrote; the chunks' crc32c."""
    held = (tuple(z.shape), np.dtype(z.dtype).str, tuple(z.chunks))
    try:
        written = (tuple(marker["shape"]), str(marker["dtype"]), tuple(marker["chunks"]))
        crcs = [int(c) for c in marker["crc32c"]]
        count = int(marker["chunk_count"])
    except (KeyError, TypeError, ValueError) as err:
        raise DamagedStoreError(f"the zarr array at {where} has a damaged lazyfuel marker ({err!r} in "
                                "attribute lazyfuel); it cannot be checked, so it is not read") from None
    names = ("shape", "dtype", "chunks")
    for name, h, w in zip(names, held, written):
        if h != w:
            raise DamagedStoreError(f"the zarr array at {where} has metadata {name} {h} but lazyfuel wrote "
                                    f"{w}: the metadata disagrees with the data; refusing to read it")
    expected = math.prod(chunk_grid(held[0], held[2]))
    if not count == len(crcs) == expected:
        raise DamagedStoreError(f"the zarr array at {where} has {expected} chunks in its grid but its marker "
                                f"records {count} chunk(s) and {len(crcs)} checksum(s); refusing to read it")
    return crcs


class VerifiedChunks:
    """A read-only array-like over a zarr array lazyfuel wrote; every chunk read is checked."""

    def __init__(self, z: Any, crcs: list[int], where: str) -> None:
        self.z = z
        self.crcs = crcs
        self.where = where
        self.shape = tuple(z.shape)
        self.dtype = np.dtype(z.dtype)
        self.ndim = len(self.shape)
        self.chunks = tuple(z.chunks)
        self.grid = chunk_grid(self.shape, self.chunks)

    def __getitem__(self, key: Any) -> np.ndarray:
        box, within = _bounding_box(key, self.shape)
        out = np.empty(tuple(s.stop - s.start for s in box), self.dtype)
        if out.size:
            spans = [range(s.start // c, (s.stop - 1) // c + 1) for s, c in zip(box, self.chunks)]
            for position in np.ndindex(*(len(r) for r in spans)):
                where = tuple(r[i] for r, i in zip(spans, position))
                region = self.region(where)
                values = self.chunk(where)
                take = tuple(slice(max(r.start, b.start), min(r.stop, b.stop)) for r, b in zip(region, box))
                out[tuple(slice(t.start - b.start, t.stop - b.start) for t, b in zip(take, box))] = \
                    values[tuple(slice(t.start - r.start, t.stop - r.start) for t, r in zip(take, region))]
        return out[within]

    def region(self, where: tuple[int, ...]) -> tuple[slice, ...]:
        """The part of the array the chunk at grid position `where` holds."""
        return tuple(slice(p * c, min((p + 1) * c, n)) for p, c, n in zip(where, self.chunks, self.shape))

    def named(self, where: tuple[int, ...]) -> str:
        """How errors name the chunk at grid position `where`."""
        key = self.z.metadata.encode_chunk_key(where)
        return f"chunk {where} (key {key!r}) of the zarr array at {self.where}"

    def missing(self, where: tuple[int, ...]) -> DamagedStoreError:
        """The error for the chunk at `where` not being in the store."""
        return DamagedStoreError(f"{self.named(where)} is missing: lazyfuel wrote every chunk of this array, "
                                 "so it was deleted or lost since; refusing to read fill values in its place")

    def damaged(self, where: tuple[int, ...], what: str) -> DamagedStoreError:
        """The error for the chunk at `where`, which `what` (a phrase)."""
        return DamagedStoreError(f"{self.named(where)} {what}")

    def chunk(self, where: tuple[int, ...]) -> np.ndarray:
        """The values of the chunk at grid position `where`, checked (DamagedStoreError)."""
        from zarr.core.sync import sync

        key = self.z.metadata.encode_chunk_key(where)
        if not sync((self.z.store_path / key).exists()):
            raise self.missing(where)
        named = self.named(where)
        region = self.region(where)
        try:
            values = np.asarray(self.z[region])
        except Exception as err:  # zarr's codecs: crc mismatch, zstd errors, short buffers
            reason = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise DamagedStoreError(f"{named} cannot be decoded ({type(err).__name__}: {reason}): it is "
                                    "truncated or corrupted") from err
        self.verify(where, values_crc(values))
        return values

    def verify(self, where: tuple[int, ...], found: int) -> None:
        """DamagedStoreError unless `found` is the crc32c of its values lazyfuel recorded for the
        chunk at grid position `where`."""
        written = self.crcs[int(np.ravel_multi_index(where, self.grid)) if self.grid else 0]
        if found != written:
            raise DamagedStoreError(f"{self.named(where)} does not hold what lazyfuel wrote there (crc32c "
                                    f"of its values {found:08x}, written {written:08x}): it was swapped with "
                                    "another chunk, overwritten, or the store was replaced after it was "
                                    "opened")


def _bounding_box(key: Any, shape: tuple[int, ...]) -> tuple[tuple[slice, ...], tuple[Any, ...]]:
    """For a basic index `key`: the unit-step box it lies in, and the same index relative to it."""
    key = key if isinstance(key, tuple) else (key,)
    if any(k is Ellipsis for k in key):
        at = key.index(Ellipsis)
        key = key[:at] + (slice(None),) * (len(shape) - len(key) + 1) + key[at + 1:]
    key = key + (slice(None),) * (len(shape) - len(key))
    box, within = [], []
    for k, n in zip(key, shape):
        if isinstance(k, slice):
            r = range(*k.indices(n))
            if not r:
                box.append(slice(0, 0))
                within.append(slice(0, 0))
                continue
            lo, hi = min(r[0], r[-1]), max(r[0], r[-1]) + 1
            end = r[-1] - lo + (1 if r.step > 0 else -1)
            box.append(slice(lo, hi))
            within.append(slice(r[0] - lo, end if end >= 0 else None, r.step))
        elif isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of bounds for an axis of size {n}")
            i = int(k) % n
            box.append(slice(i, i + 1))
            within.append(0)
        else:
            raise TypeError(f"a verified zarr array takes basic indices (ints, slices, ...), got "
                            f"{type(k).__name__}")
    return tuple(box), tuple(within)
