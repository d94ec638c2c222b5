"""A select's rows gathered on the host straight into a result in device memory (issue 18 item 4).

`gather_up(pool, source, positions)` is `source[positions]` (rows along axis 0 of a C-contiguous
host array) as a new `ResidentBlock` of `pool` (or into a given block: a compute's one result
allocation's part, `graph/placed.py`), with no host array of the result in between and no
pageable upload:

- where the pool's device memory is mapped (lavapipe, integrated GPUs), the rows are taken by the
  copy pool's threads (`hostcopy.take_rows`) straight into the block's memory;
- elsewhere (a discrete GPU) the result is cut into pieces of `PIECE_BYTES`: the threads take a
  piece's rows (runs of `RUN_BYTES`) into page-locked upload staging, one batch copies it into its
  place in the block (vkCmdCopyBuffer), and is submitted without waiting, so the next piece is
  gathered while this one crosses the link; at most `IN_FLIGHT` pieces are on their way at a
  time (their staging is the allocator's, reused per size class: a second compute page-locks
  nothing new). The staging is the allocator's write-combined upload type.
Measured on the H200 (benchmarks/probes/w2_streamed.py, branches `w2fast` and `w2again`) and gone:
host-cached staging (alike: 56.5 against 55.4 ms for the whole W2 compute), each piece cut among
all 16 threads (94 ms against 53: the threads idle at every piece's end and submit, 64 times),
and that with 2 or 3 pieces queued on the copy threads ahead while the caller submits (103.8 /
113.5 ms against 55.4: the 4 tasks' pieces then queue behind one another on the one copy pool).
So the time is about max(gather, upload) plus one piece, where gathering into host memory and
then uploading the whole result pays both, in turn. The planner decides when to take it
(`graph.touched.streamed_where_cheaper`, priced by `Planner.host_copy_cost` and the link's
page-locked rate); the graph layer calls it through the `base.RowStreamer` capability.
"""

from __future__ import annotations

import math
from collections import deque
from typing import TYPE_CHECKING

import numpy as np

from lazyfuel import profiling
from lazyfuel.backends.vulkan.residency import ResidentBlock
from lazyfuel.checks import checked_indices
from lazyfuel.hostcopy import row_runs, take_rows

if TYPE_CHECKING:
    from lazyfuel.backends.vulkan.batch import Batch
    from lazyfuel.backends.vulkan.memory import Allocation
    from lazyfuel.backends.vulkan.pool import DevicePool

PIECE_BYTES = 16 << 20  # the result bytes one batch uploads
IN_FLIGHT = 2  # pieces submitted and not yet waited for (double buffering)
RUN_BYTES = 4 << 20  # a piece's rows are taken on the copy pool's threads in runs of this


def pieces(nbytes: int, row_bytes: int) -> int:
    """How many pieces a result of `nbytes` in rows of `row_bytes` is uploaded in."""
    return -(-nbytes // max(rows_per_piece(row_bytes) * row_bytes, 1)) if nbytes else 0


def rows_per_piece(row_bytes: int) -> int:
    """The rows of `row_bytes` one piece holds (at least one)."""
    return max(1, PIECE_BYTES // max(row_bytes, 1))


def piece_runs(rows: int, row_bytes: int) -> list[tuple[int, int]]:
    """The runs [start, stop) a piece of `rows` rows of `row_bytes` is taken in, each on a copy
    thread: runs of `RUN_BYTES`."""
    return row_runs(rows, row_bytes, 2 * RUN_BYTES, RUN_BYTES)


def gather_up(pool: DevicePool, source: np.ndarray, positions: np.ndarray,
              shared: bool = False, into: ResidentBlock | None = None) -> ResidentBlock:
    """`source[positions]` along axis 0 as a new block in `pool`'s device memory (in a buffer CUDA
    can import with `shared`), or written into `into` (a block of `pool` of the result's shape and
    dtype reserved by the caller: a `part` of a compute's one result allocation, pinned here
    while it is written) and returned; see the module docstring. `source` is C-contiguous and
    every position lies in 0..len(source)-1 (the caller checked them). Counted in
    `lazyfuel.profile` as the result's bytes uploaded."""
    if not source.flags.c_contiguous or source.ndim < 1 or positions.ndim != 1:
        raise ValueError(f"gather_up takes a C-contiguous source of rank >= 1 and 1-d positions; got a "
                         f"source of shape {source.shape} (contiguous: {source.flags.c_contiguous}) and "
                         f"positions of shape {positions.shape}")
    # checked once up front, so the pieces are taken with numpy's mode="clip" (mode="raise" takes
    # every piece into a temporary array first and copies it over: 2-3x slower on the H200)
    checked_indices(positions, len(source), what="position")
    shape = (len(positions), *source.shape[1:])
    if into is not None and (into.pool is not pool or into.shape != shape or into.dtype != source.dtype):
        raise ValueError(f"gather_up(into=...) takes a block of {pool.label} of shape {shape} and dtype "
                         f"{source.dtype}; got {into!r}")
    row_bytes = math.prod(source.shape[1:]) * source.dtype.itemsize
    nbytes = len(positions) * row_bytes
    if into is not None:
        try:
            submits = fill(pool, source, positions, into.pin(), row_bytes)
        finally:
            into.unpin()
        block = into
    else:
        block = ResidentBlock.reserve(pool, shape, source.dtype, shared=shared)
        try:
            submits = fill(pool, source, positions, block.allocation, row_bytes)
        except BaseException:
            block.free()
            raise
        block.done()
    profiling.record(bytes_uploaded=nbytes, submits=submits, device=pool.label)
    return block


def fill(pool: DevicePool, source: np.ndarray, positions: np.ndarray, target: Allocation,
         row_bytes: int) -> int:
    """`source[positions]` (checked positions) into the first bytes of device memory `target`:
    taken straight into it where it is mapped, else streamed through staging piece by piece (see
    the module docstring). Returns the submits (none where mapped)."""
    nbytes = len(positions) * row_bytes
    if not nbytes:
        return 0
    if target.host is not None:  # device memory is host memory: the rows go straight there
        take_rows(source, positions, _rows(target.host, nbytes, source, len(positions)),
                  mode="clip", split_min=2 * RUN_BYTES, piece=RUN_BYTES)
        return 0
    return _streamed(pool, source, positions, target, row_bytes)


def _rows(host: np.ndarray, nbytes: int, source: np.ndarray, count: int) -> np.ndarray:
    """The first `nbytes` of mapped bytes `host` as `count` rows shaped like `source`'s."""
    return host[:nbytes].view(source.dtype).reshape((count, *source.shape[1:]))


def _streamed(pool: DevicePool, source: np.ndarray, positions: np.ndarray, target: Allocation,
              row_bytes: int) -> int:
    """The rows into unmapped device memory `target`, piece by piece through page-locked staging,
    each piece's upload overlapping the next one's gather (see the module docstring); returns the
    submits (one a piece)."""
    step = rows_per_piece(row_bytes)
    flight: deque[Batch] = deque()
    try:
        for start in range(0, len(positions), step):
            stop = min(start + step, len(positions))
            while len(flight) >= IN_FLIGHT:
                _done(flight.popleft())
            batch = pool.batch()
            flight.append(batch)
            n = (stop - start) * row_bytes
            stage = batch.staging(n)
            assert stage.host is not None, "staging is host-visible"
            take_rows(source, positions[start:stop], _rows(stage.host, n, source, stop - start),
                      mode="clip", split_min=2 * RUN_BYTES, piece=RUN_BYTES)  # as `piece_runs` cuts it
            batch.copy(stage, 0, target, start * row_bytes, n)
            batch.start()
        while flight:
            _done(flight.popleft())
        return -(-len(positions) // step)
    finally:
        for batch in flight:  # an error: let the device finish what was submitted, then free it
            try:
                if batch.submitted:
                    batch.finish()
            finally:
                batch.close()


def _done(batch: Batch) -> None:
    """Wait for one piece's upload and give its staging and context back."""
    try:
        batch.finish()
    finally:
        batch.close()
