"""Host arrays registered for the device while a `pinned(...)` block runs: imported once, reused.

Importing a host array's pages (VK_EXT_external_memory_host) makes a discrete GPU's driver pin
them, and freeing the import unpins them. NVIDIA's driver does both at ~15 GB/s in total, one
thread at a time (benchmarks/import_cost.py), so a loop that streams chunks of the same buffers
through the device (`compute(out=)` into one result array, run after run) spends most of its
time pinning. Inside `with pinned(x, out):` the allocator imports each registered array once per
device, in segments of at most `SEGMENT` bytes (a driver caps one allocation: 4 GiB on the H200),
and every transfer of a range inside a segment borrows that import; the imports are released when
the block ends. Outside such a block nothing changes.

Rules, as for any memory the device reads: the arrays must stay alive and unmoved inside the
block (no `ndarray.resize`), and no work using them may still run when it ends (`compute()` has
returned by then). A range that straddles a segment boundary is imported on its own, as before.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

SEGMENT = 1 << 30  # bytes of one import: under every driver's maxMemoryAllocationSize seen

_lock = threading.Lock()
_ranges: dict[int, tuple[int, int, Any]] = {}  # token -> (start address, nbytes, the array)
_cached: dict[tuple[int, int], list[tuple[Any, Any]]] = {}  # (token, segment) -> [(importer, import)]
_tokens = itertools.count(1)


@contextmanager
def pinned(*arrays: Any) -> Iterator[None]:
    """Register `arrays` (numpy arrays, any layout: their memory spans) for the block's duration;
    their device imports are made on first use and released at the end."""
    from lazyfuel.layout import memory_span

    tokens = []
    with _lock:
        for a in arrays:
            span = memory_span(np.asarray(a))
            if span.nbytes:
                token = next(_tokens)
                _ranges[token] = (int(span.__array_interface__["data"][0]), span.nbytes, a)
                tokens.append(token)
    try:
        yield
    finally:
        with _lock:
            done = [key for key in _cached if key[0] in tokens]
            imports = [pair for key in done for pair in _cached.pop(key)]
            for token in tokens:
                del _ranges[token]
        for importer, imported in imports:
            importer.release(imported)


def segment_of(address: int, nbytes: int) -> tuple[tuple[int, int], int, int] | None:
    """For a range inside a registered array and inside one of its segments: the segment's key,
    its start address and its length; else None."""
    with _lock:
        for token, (start, size, _) in _ranges.items():
            if start <= address and address + nbytes <= start + size:
                index = (address - start) // SEGMENT
                first = start + index * SEGMENT
                length = min(SEGMENT, start + size - first)
                if address + nbytes <= first + length:
                    return (token, index), first, length
    return None


def borrow(key: tuple[int, int], importer: Any, make: Any) -> Any:
    """The import of segment `key` made by `importer` (`make()` on first use; None if it fails)."""
    with _lock:
        for owner, imported in _cached.get(key, ()):
            if owner is importer:
                return imported
        if key[0] not in _ranges:  # the block ended meanwhile
            return None
        imported = make()
        if imported is not None:
            _cached.setdefault(key, []).append((importer, imported))
        return imported


def forget(importer: Any) -> None:
    """Release every import `importer` made for a registered array (its device is going away)."""
    with _lock:
        mine = []
        for key, pairs in list(_cached.items()):
            mine += [imported for owner, imported in pairs if owner is importer]
            rest = [(owner, imported) for owner, imported in pairs if owner is not importer]
            if rest:
                _cached[key] = rest
            else:
                del _cached[key]
    for imported in mine:
        importer.release(imported)
