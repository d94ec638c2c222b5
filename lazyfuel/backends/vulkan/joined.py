"""Row ranges of resident blocks joined into one resident block of one pool, by device copies.

A select over a resident array whose output block needs rows of several source blocks gets them
as pieces: ranges of the blocks its read tasks left on their own pools (`graph.task.read_pieces`).
`joined(pool, parts, axis)` concatenates them along `axis` into a new `ResidentBlock` on `pool`
in one batch: a part on `pool` is copied where it lies, one of another pool comes device to
device where `peer.py` has a path (only its range is moved), anything else (numpy, a pool with
no path) through host memory (counted in `lazyfuel.profile`). A part's rows must be contiguous
bytes (no axis before `axis` longer than 1); where they are not, `joined` returns None and the
caller concatenates on the host.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from lazyfuel.backends.vulkan import peer
from lazyfuel.backends.vulkan.memory import Allocation
from lazyfuel.backends.vulkan.residency import ResidentBlock

if TYPE_CHECKING:
    from lazyfuel.backends.vulkan.batch import Batch
    from lazyfuel.backends.vulkan.pool import DevicePool


def joined(pool: DevicePool, parts: Sequence[tuple[Any, int, int]], axis: int) -> ResidentBlock | None:
    """Rows `lo:hi` along `axis` of each part (a resident block or a numpy array), concatenated
    along `axis` into one new block on `pool`; None where a part's rows are not contiguous bytes."""
    first = parts[0][0]
    shape, dtype = list(first.shape), np.dtype(first.dtype)
    if any(math.prod(block.shape[:axis]) > 1 for block, _, _ in parts):
        return None
    row = math.prod(shape[axis + 1:]) * dtype.itemsize
    shape[axis] = sum(hi - lo for _, lo, hi in parts)
    whole = ResidentBlock.reserve(pool, tuple(shape), dtype)
    try:
        with pool.batch() as batch:
            at = 0
            for block, lo, hi in parts:
                n = (hi - lo) * row
                if n:
                    src, offset = _source(batch, block, lo * row, n)
                    batch.copy(src, offset, whole.allocation, at, n)
                    at += n
            batch.barrier()
            batch.run()
    except BaseException:
        whole.free()
        raise
    whole.done()
    return whole


def _source(batch: Batch, block: Any, offset: int, nbytes: int) -> tuple[Allocation, int]:
    """Device memory holding `nbytes` of `block` from byte `offset`, for `batch`, and where they
    start in it."""
    if isinstance(block, ResidentBlock):
        if block.pool is batch.pool:
            return block.bind(batch), offset
        moved = peer.bind(block, batch, offset, nbytes)
        if moved is not None:
            return moved, 0
    host = np.ascontiguousarray(np.asarray(block)).reshape(-1).view(np.uint8)[offset:offset + nbytes]
    src = batch.alloc(nbytes)
    batch.upload(src, host)
    return src, 0
