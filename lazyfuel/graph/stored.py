"""Reading a select's rows straight from a zarr store: only what the indices touch.

A select (index_select or gather) read per source chunk (`graph.pieces`) over a `from_zarr`
source does not load whole chunks through dask: each read task (`StoredReader`, one per touched
source block) asks the store for the rows its block gives, once each however many output blocks
(or repeated indices) want them, in ascending order (a gather: the rows along its axis that its
elements lie in, `read_elements`):

- a chunk stored as its raw bytes (zarr v2 without compressor or filters in C order, v3 with the
  `bytes` codec alone), selected along its first axis: only the byte ranges of the touched rows,
  neighbouring ranges merged when the gap between them is under `GAP_BYTES` (one read beats many
  small ones), a local file's read with several spans in flight (`graph.file_spans`), other
  stores' through zarr's async store API, `SPANS_IN_FLIGHT` at a time;
- anything else (compressed chunks, sharded stores, other axes): zarr's orthogonal selection of
  the rows in the block's region, which decodes each touched chunk once (a sharded store: only
  the touched inner chunks, zarr's partial decode) and keeps only the rows.

Read tasks run on dask's worker threads, so chunks decode in parallel (numcodecs' zstd and blosc
release the GIL). `BUDGET` bounds the chunk bytes the read tasks of one process hold at once
by `lazyfuel.config.read_budget` (`read_budget`): a task waits for its share before reading.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np

from lazyfuel import windowed
from lazyfuel.dtypes import as_native
from lazyfuel.graph import chunks as ch
from lazyfuel.graph import file_spans
from lazyfuel.graph.byte_ranges import (  # noqa: F401 (re-exported)
    GAP_BYTES,
    RANGE_BYTES,
    SPANS_IN_FLIGHT,
    _read_spans,
    coalesced,
)
from lazyfuel.graph.read_memory import (  # noqa: F401 (re-exported)
    _HELD,
    ByteBudget,
    _Held,
    _Scratch,
    _stored_size,
    host_memory,
    read_budget,
)
from lazyfuel.graph.touched import touched_rows
from lazyfuel.graph.zarr_chunks import (  # noqa: F401 (re-exported)
    MISSING,
    _bytes_dtype,
    _local_file,
    _one_compressor,
    _raw_bytes_dtype,
    _raw_shards,
    _row_offsets,
    _trailer,
    raw_dtype,
    regular_chunks,
)

BUDGET = ByteBudget()


@dataclass(frozen=True, eq=False)
class StoredReader:
    """One read task of a select over a zarr source (the counterpart of `task.Reader`).

    `region` is the source block in the array (slices); `positions` (U32) the rows along `axis`,
    local to the block, that every output block needs from it, piece j being
    `positions[bounds[j]:bounds[j + 1]]`, or, when `flat` (a gather), element offsets into the
    raveled block. `chunk` is the zarr chunk the block is (its coordinates) when the block is
    exactly one chunk, else None. `block` numbers the task (unused: no device). `budget`: the
    `read_budget` in force where the task was made (bytes).
    """

    zarr: Any  # the zarr.Array
    region: tuple[slice, ...]
    chunk: tuple[int, ...] | None
    positions: np.ndarray
    bounds: tuple[int, ...]
    axis: int
    block: int = 0
    flat: bool = False
    budget: int = field(default_factory=lambda: read_budget())


def read_stored(reader: StoredReader, runtime: Any = None) -> tuple[np.ndarray, ...]:
    """The read task: the block's touched rows, each read once, cut into the pieces."""
    if len(reader.bounds) < 2:
        return ()
    if reader.flat:
        picked = read_elements(reader)
        return tuple(picked[lo:hi] for lo, hi in pairwise(reader.bounds))
    positions = reader.positions
    lead = (slice(None),) * reader.axis
    if positions.size < 2 or bool(np.all(positions[1:] > positions[:-1])):  # pieces are views
        data = as_native(read_rows(reader, positions.astype(np.int64)))
        return tuple(data[(*lead, slice(lo, hi))] for lo, hi in pairwise(reader.bounds))
    rows, inverse = touched_rows(positions, int(positions.max()) + 1)
    data = as_native(read_rows(reader, rows.astype(np.int64)))
    return tuple(np.take(data, inverse[lo:hi], axis=reader.axis) for lo, hi in pairwise(reader.bounds))


def read_elements(reader: StoredReader) -> np.ndarray:
    """A gather's read task: the elements at `reader.positions` (offsets into the raveled block),
    1-d. Only the rows along `reader.axis` that they lie in are read (once each, `read_rows`);
    the offsets are renumbered into those rows and taken from them."""
    shape = [s.stop - s.start for s in reader.region]
    d = reader.axis
    extent, inner = shape[d], math.prod(shape[d + 1:])
    outer, rest = np.divmod(reader.positions.astype(np.int64), extent * inner)
    local, within = np.divmod(rest, inner)
    rows, rank = touched_rows(local, extent)
    data = as_native(read_rows(reader, rows.astype(np.int64)))
    return np.ascontiguousarray(data).reshape(-1)[(outer * rows.size + rank) * inner + within]


WHOLE_COVER = 7 / 8
"""A read of a chunk lazyfuel checksummed whose merged byte ranges (`coalesced`) hold at least this
share of the chunk's bytes reads the chunk whole, verified; less is read as those ranges (see
`read_rows`). Measured (`benchmarks/probes/span_reads.py`, a 1.95 GB store lazyfuel wrote, page
cache dropped): the verified whole read (`_verified_rows`) took 1.06-1.23x the ranges' time where
they held 0.86-0.995 of the bytes, 1.1-1.8x at 0.32-0.66; so the chunk is verified where that is
nearly free and read in part where that saves much."""


def _mostly_covered(arr: Any, store_path: Any, offsets: np.ndarray, dtype: np.dtype, full: tuple[int, ...]
                    ) -> bool:
    """Whether the rows at byte `offsets` of a raw chunk of `arr` (`_row_offsets`), merged as
    they would be read (`coalesced`), hold at least `WHOLE_COVER` of the chunk's bytes."""
    row_bytes = math.prod(full) * dtype.itemsize
    spans = coalesced(np.sort(offsets[offsets != MISSING]), row_bytes)
    return sum(hi - lo for lo, hi, _ in spans) >= WHOLE_COVER * arr.chunks[0] * row_bytes


def _unwrapped(held: Any) -> tuple[Any, Any]:
    """(the zarr array, the `integrity.VerifiedChunks` over it or None) of a reader's `zarr`."""
    from lazyfuel.integrity import VerifiedChunks

    return (held.z, held) if isinstance(held, VerifiedChunks) else (held, None)


Target = tuple[np.ndarray, np.ndarray]
"""Where rows read go instead of a new array: (an array, the row of it each row read goes to)."""


def read_rows(reader: StoredReader, rows: np.ndarray, into: Target | None = None) -> np.ndarray | None:
    """Rows `rows` (ascending, unique, local to the block) along `reader.axis` of its region; or,
    with `into` (rows along axis 0, each a whole row of its array), None once they are put there
    straight from the store's bytes where they are read as byte ranges, or decoded a window at a
    time, in the array's dtype (else they are returned, as without `into`).

    An array lazyfuel wrote with checksums (`reader.zarr` is its `VerifiedChunks`) is read whole
    chunk by chunk, each chunk verified (decision 55), except where the rows' merged byte ranges
    of a raw chunk hold under `WHOLE_COVER` of its bytes: those ranges alone, checked only for
    the chunk being there at its full length (a crc32c over the whole chunk cannot check a part)."""
    held, region, axis = reader.zarr, reader.region, reader.axis
    arr, checked = _unwrapped(held)
    shape = [s.stop - s.start for s in region]
    shape[axis] = rows.size
    if axis == 0 and reader.chunk is not None:
        found = _row_offsets(arr, reader.chunk, rows)
        if found is not None and (checked is None or not _mostly_covered(arr, *found)):
            target = into if into is not None and into[0].dtype == found[2] and \
                into[0].shape[1:] == tuple(shape[1:]) == found[3] else None
            length = math.prod(arr.chunks) * np.dtype(arr.dtype).itemsize + _trailer(arr)
            got = _ranged_rows(arr, *found, tuple(shape), reader.budget,
                               None if checked is None else (checked, reader.chunk, length), target)
            return None if target is not None else got
    if checked is not None and reader.chunk is not None:  # a local raw chunk: mapped and verified
        verified = _verified_rows(arr, checked, reader.chunk, rows, axis, tuple(shape), reader.budget)
        if verified is not None:
            return verified
    if checked is not None:  # whole chunks, each verified
        nbytes = math.prod(s.stop - s.start for s in region) * np.dtype(arr.dtype).itemsize
        taken = BUDGET.take(nbytes, reader.budget)
        try:
            return np.take(checked[region], rows, axis=axis)
        finally:
            BUDGET.give(taken)
    decoder = _one_compressor(arr) if reader.chunk is not None else None
    if decoder is not None:
        return _decoded_rows(arr, reader.chunk, rows, axis, tuple(shape), *decoder, reader.budget, into)
    nbytes = math.prod(s.stop - s.start for s in region) * np.dtype(arr.dtype).itemsize
    taken = BUDGET.take(nbytes, reader.budget)  # zarr decodes whole (inner) chunks
    try:
        selection = list(region)
        selection[axis] = rows + region[axis].start
        return np.asarray(arr.get_orthogonal_selection(tuple(selection)))
    finally:
        BUDGET.give(taken)


SCRATCH = _Scratch(keep=4)


def _decoded_rows(arr: Any, chunk: tuple[int, ...], rows: np.ndarray, axis: int, shape: tuple[int, ...],
                  codec: Any, dtype: np.dtype, budget: int, into: Target | None = None) -> np.ndarray | None:
    """Rows `rows` along `axis` of compressed chunk `chunk`, cut to `shape`; a chunk never written
    reads as the fill value. Its bytes are read whole (a local file into the thread's kept
    buffer); a zstd chunk read along its first axis is decoded a window at a time, the rows copied
    out of each (`windowed.zstd_rows`), a blosc chunk of zstd blocks only in the blocks the rows lie
    in (`windowed.blosc_rows`); anything else is decoded once into a kept buffer of the chunk's
    size and the rows copied out. With `into` (`read_rows`) the windows' rows go straight to
    their rows there, and None is returned, where its array is C-contiguous in `dtype` with rows
    of the chunk's width (no array of the rows between: one copy less)."""
    from numcodecs import Blosc, Zstd
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    store_path = arr.async_array.store_path / arr.metadata.encode_chunk_key(chunk)
    full = tuple(arr.chunks)
    nbytes = math.prod(full) * dtype.itemsize
    stream = axis == 0 and isinstance(codec, (Zstd, Blosc)) and windowed.zstd_available()
    file = _local_file(store_path)
    size = _stored_size(file)
    taken = BUDGET.take((nbytes if size is None else size) + (windowed.WINDOW_BYTES if stream else nbytes),
                        budget)
    try:
        if file is not None:
            compressed = _HELD.read(file)
        else:
            got = sync(store_path.get(default_buffer_prototype()))
            compressed = None if got is None else got.as_numpy_array()
        if compressed is None:
            return np.full(shape, arr.fill_value, dtype)
        if stream:
            placed = into is not None and into[0].dtype == dtype and into[0].flags.c_contiguous and \
                into[0].shape[1:] == tuple(shape[1:]) == full[1:]
            out, dest = (into if placed and into is not None
                         else (np.empty((rows.size, *full[1:]), dtype), None))
            decode = windowed.zstd_rows if isinstance(codec, Zstd) else windowed.blosc_rows
            try:
                decode(compressed, nbytes // full[0], full[0], rows, out, dest)
                return None if placed else out[(slice(None), *(slice(0, n) for n in shape[1:]))]
            except windowed.BloscUnsupported:
                pass  # decoded whole below
            except ValueError as err:
                raise ValueError(f"zarr chunk {store_path}: {err}") from None
        scratch = SCRATCH.take(nbytes)
        try:
            codec.decode(compressed, out=scratch)
            stored = scratch.view(dtype).reshape(full)
            pick = tuple(rows if a == axis else slice(0, n) for a, n in enumerate(shape))
            return stored[pick]
        finally:
            SCRATCH.give(scratch)
    finally:
        BUDGET.give(taken)


def _ranged_rows(arr: Any, store_path: Any, offsets: np.ndarray, dtype: np.dtype, full: tuple[int, ...],
                 shape: tuple[int, ...], budget: int, checked: tuple[Any, tuple[int, ...], int] | None = None,
                 into: Target | None = None) -> np.ndarray:
    """The rows at byte `offsets` of `store_path` (each `full` elements of `dtype`), read as
    merged byte ranges, each put in place as it arrives, cut to `shape` (a block narrower than its
    stored chunk); rows `MISSING` read as the fill value. A local store's file is read here with
    `os.preadv` into one kept buffer (`_read_file_spans`); any other store through zarr's async
    API, `SPANS_IN_FLIGHT` requested at a time. `checked` (the array's `VerifiedChunks`, the
    chunk's grid position, the length lazyfuel wrote it with): a chunk that is not there, or (a
    local file) not of that length, is a `DamagedStoreError`. `into` (its rows `full`, its dtype
    `dtype`): the rows go to their rows there instead, and it is returned."""
    from zarr.core.sync import sync

    row_bytes = math.prod(full) * dtype.itemsize
    out, dest = (np.empty(shape, dtype), np.arange(shape[0])) if into is None else into
    trim = (slice(None), *(slice(0, n) for n in shape[1:]))
    missing = offsets == MISSING
    if missing.any():
        out[dest[missing]] = arr.fill_value
    order = np.flatnonzero(~missing)
    order = order[np.argsort(offsets[order], kind="stable")]
    spans = coalesced(offsets[order], row_bytes)
    # rows in order, to consecutive rows of `out`: each span is one copy into the rows it covers
    whole = shape[1:] == full and bool(np.all(order == np.arange(order.size))) and \
        bool(np.all(np.diff(dest) == 1))

    def place(lo: int, part: slice, buf: np.ndarray) -> None:
        stored = buf.view(dtype).reshape(-1, *full)
        at = order[part]
        if whole:
            first = int(dest[part.start])
            np.take(stored, (offsets[at] - lo) // row_bytes, axis=0, out=out[first:first + at.size],
                    mode=windowed.TAKE_MODE)
        else:
            out[dest[at]] = stored[(offsets[at] - lo) // row_bytes][trim]

    taken = BUDGET.take(min(sum(hi - lo for lo, hi, _ in spans), SPANS_IN_FLIGHT * RANGE_BYTES), budget)
    try:
        file = _local_file(store_path)
        if file is not None:
            absent = _read_file_spans(file, spans, place, None if checked is None else checked[2], taken)
        else:
            absent = sync(_read_spans(store_path, spans, place))
    except _WrongLength as err:
        assert checked is not None
        raise _wrong_length(checked[0], checked[1], err.args[0], checked[2]) from None
    finally:
        BUDGET.give(taken)
    if checked is not None and absent:
        raise checked[0].missing(checked[1])
    if absent == len(spans) and absent and not missing.any():  # a chunk never written
        out[dest] = arr.fill_value
    elif absent:
        raise OSError(f"zarr chunk {store_path} vanished while it was read")
    return out


def _wrong_length(checked: Any, chunk: tuple[int, ...], size: int, length: int) -> Exception:
    """The error for chunk `chunk` of `checked` (a `VerifiedChunks`) whose file holds `size`
    bytes where lazyfuel wrote `length`."""
    return checked.damaged(chunk, f"has {size} bytes where lazyfuel wrote {length}: it is truncated or was "
                           "replaced")


def _verified_rows(arr: Any, checked: Any, chunk: tuple[int, ...], rows: np.ndarray, axis: int,
                   shape: tuple[int, ...], budget: int) -> np.ndarray | None:
    """Rows `rows` along `axis` of whole chunk `chunk` of an array lazyfuel wrote raw (`checked`,
    its `VerifiedChunks`) to a local store, cut to `shape`, read straight from a mapping of its
    file (`file_spans.mapped_file`) after both of its crc32c are checked over the mapped bytes
    (the stored one after its values, and the one lazyfuel's marker recorded): the checks
    `VerifiedChunks.chunk` makes, without zarr's decode and its copies of the chunk (2.5-3.5 s
    for a 1.95 GB store there, mostly system time for fresh buffers; out_of_core session 8).
    None where this does not apply (not local, not raw, an edge chunk, a non-native byte order):
    `VerifiedChunks` reads it then."""
    import google_crc32c

    dtype, full = raw_dtype(arr), tuple(arr.chunks)
    region = checked.region(chunk)
    if dtype is None or not dtype.isnative or _trailer(arr) != 4 or \
            tuple(s.stop - s.start for s in region) != full:
        return None
    file = _local_file(arr.async_array.store_path / arr.metadata.encode_chunk_key(chunk))
    if file is None:
        return None
    nbytes = math.prod(full) * dtype.itemsize
    taken = BUDGET.take(nbytes, budget)
    try:
        try:
            fd = os.open(file, os.O_RDONLY)
        except FileNotFoundError:
            raise checked.missing(chunk) from None
        try:
            size = os.fstat(fd).st_size
            if size != nbytes + 4:
                raise _wrong_length(checked, chunk, size, nbytes + 4)
            with file_spans.mapped_file(fd, size) as view:
                found, kept = google_crc32c.value(view[:nbytes]), int.from_bytes(view[nbytes:], "little")
                if found != kept:
                    raise checked.damaged(chunk, f"cannot be decoded (crc32c of its bytes {found:08x}, "
                                          f"stored {kept:08x}): it is truncated or corrupted")
                checked.verify(chunk, found)
                values = view[:nbytes].view(dtype).reshape(full)
                return np.take(values, rows, axis=axis)[tuple(slice(0, n) for n in shape)]
        finally:
            os.close(fd)
    finally:
        BUDGET.give(taken)


class _WrongLength(Exception):
    """A chunk file whose length is not the one expected (its length is the argument)."""


def _read_file_spans(file: str, spans: Sequence[tuple[int, int, slice]],
                     place: Callable[[int, slice, np.ndarray], None], length: int | None = None,
                     room: int = RANGE_BYTES) -> int:
    """Read each span of `file` and `place` it, several at once within `room` bytes
    (`file_spans.read_file_spans`); how many spans are absent (all of them when the file is: a
    chunk never written). `_WrongLength` when `length` is given and the file is not that long."""
    try:
        fd = os.open(file, os.O_RDONLY)
    except FileNotFoundError:
        return len(spans)
    try:
        if length is not None and os.fstat(fd).st_size != length:
            raise _WrongLength(os.fstat(fd).st_size)
        file_spans.read_file_spans(fd, file, spans, place, room)
    finally:
        os.close(fd)
    return 0


def chunk_of(arr: Any, source_chunks: ch.Chunks, block: tuple[int, ...]) -> tuple[int, ...] | None:
    """The zarr chunk (a sharded array: shard) coordinates of dask block `block` when the source is
    cut exactly into the array's chunks (shards; then block and chunk coincide), else None."""
    for axis_chunks, size in zip(source_chunks, regular_chunks(arr)):
        if any(c != size for c in axis_chunks[:-1]) or axis_chunks[-1] > size:
            return None
    return block


def reads_directly(select: Any) -> bool:
    """Whether `direct_reads` applies to `select`: an index_select with concrete indices straight
    over a `from_zarr` source."""
    from lazyfuel.graph.ir import IndexSelect, Source

    source = getattr(select, "data", None)
    return (isinstance(select, IndexSelect) and isinstance(source, Source) and source.zarr is not None
            and not select.indices.lazy)


def narrow_keys(keys: np.ndarray, extent: int) -> np.ndarray:
    """`keys` (0 <= key < `extent`) as uint16 where `extent` allows it, else as they are: numpy's
    stable sort (`np.unique(return_index=True)` takes one too) is a radix sort in one pass for
    16-bit keys and a merge sort otherwise. Grouping 262,144 random ids by their chunk (29 of
    them) took 20-60 ms as int64 against 0.6 ms as uint16: what made a random select's graph 2-5x
    slower to build than a sorted one's (out_of_core, session 9)."""
    return keys.astype(np.uint16) if extent <= 1 << 16 else keys


def stable_order(keys: np.ndarray, extent: int) -> np.ndarray:
    """The stable sorting permutation of `keys` (0 <= key < `extent`), sorted as `narrow_keys`."""
    return np.argsort(narrow_keys(keys, extent), kind="stable")


def direct_reads(select: Any, into: np.ndarray) -> tuple[dict, list] | None:
    """A task graph and its keys computing `select` into `into` (an array of its shape and dtype)
    straight from a zarr store: one task per touched source block reads the block's touched rows
    once each and puts every one in its places in `into` (`scatter_rows`). No program runs and no
    output block is assembled: one host copy from the store's bytes to the result. None unless
    `select` is an index_select with concrete indices straight over a `from_zarr` source (a
    select fused with further ops goes through the pieces and their programs)."""
    from dask.base import tokenize

    if not reads_directly(select):
        return None
    source = select.data
    d, values = select.dim, np.asarray(select.indices.values).reshape(-1)
    begin = np.asarray(ch.starts(source.chunks[d]), dtype=np.int64)
    chunk_ids = ch.chunk_ids(values, source.chunks[d])
    order = stable_order(chunk_ids, len(source.chunks[d]))  # output positions grouped by source chunk
    hit, first = np.unique(chunk_ids[order], return_index=True)
    name = f"lazyfuel-zarr-rows-{tokenize(select.name, id(into))}"
    others = [range(len(c)) for a, c in enumerate(source.chunks) if a != d]
    graph: dict = {}
    budget = read_budget()
    for c, lo, hi in zip(hit.tolist(), first.tolist(), [*first[1:].tolist(), values.size]):
        places = order[lo:hi]
        local = values[places].astype(np.int64) - begin[c]
        rows, once, inverse = np.unique(narrow_keys(local, source.chunks[d][c]), return_index=True,
                                        return_inverse=True)
        inverse = inverse.reshape(-1)
        repeats = np.flatnonzero(once[inverse] != np.arange(places.size))  # places of a row seen before
        moves = (places[once], places[repeats], places[once[inverse[repeats]]])
        for o in np.ndindex(*(len(r) for r in others)):
            block = (*o[:d], c, *o[d:])
            region = ch.block_slices(source.chunks, block)
            reader = StoredReader(source.zarr, region, chunk_of(source.zarr, source.chunks, block),
                                  rows.astype(np.uint32), (0, rows.size), d, budget=budget)
            graph[(name, *block)] = (scatter_rows, reader, into, region, moves)
    return graph, list(graph)


def scatter_rows(reader: StoredReader, into: np.ndarray, region: tuple[slice, ...],
                 moves: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    """The task of `direct_reads`: read the block's rows (once each) into their first places in
    `into` along the select's axis (`moves[0]`, one per row), then copy each repeated row there
    from its first place (`moves[2]` to `moves[1]`); `region` along the other axes."""
    axis = reader.axis

    def at(places: np.ndarray) -> tuple:
        return tuple(places if a == axis else region[a] for a in range(len(region)))

    first, repeats, sources = moves
    whole_rows = axis == 0 and all(region[a] == slice(0, n) for a, n in enumerate(into.shape) if a)
    got = read_rows(reader, reader.positions.astype(np.int64), (into, first) if whole_rows else None)
    if got is not None:  # not put in place by the read itself
        into[at(first)] = as_native(got)
    if repeats.size:
        into[at(repeats)] = into[at(sources)]


def direct_array(select: Any) -> Any:
    """`select` as a dask array (its own chunks) read straight from its zarr store into one
    buffer of its shape by `direct_reads`, each output block ready as soon as the read tasks of
    the source blocks that give it rows have run (sorted indices: a few each, so the first blocks
    can be written while the rest are read); None where `direct_reads` does not apply. The buffer
    is the whole result: for a result within `read_budget` (`to_zarr` cuts larger ones into
    slabs first)."""
    import dask.array as da
    from dask.base import tokenize

    into = np.empty(select.shape, select.dtype)
    found = direct_reads(select, into)
    if found is None:
        return None
    graph, keys = found
    d, out_chunks = select.dim, select.chunks
    along = ch.Axis(out_chunks[d])
    grid = [list(zip(ch.starts(c), (*ch.starts(c)[1:], sum(c)))) for c in out_chunks]
    needs: dict[tuple[int, ...], list] = {}
    for key in keys:
        _, _, _, region, moves = graph[key]
        hit = np.unique(along.ids(np.concatenate(moves[:2]))).tolist()
        spans = [hit if a == d else [b for b, (lo, hi) in enumerate(grid[a]) if lo < region[a].stop
                                     and region[a].start < hi] for a in range(select.ndim)]
        for block in itertools.product(*spans):
            needs.setdefault(block, []).append(key)
    name = f"lazyfuel-zarr-blocks-{tokenize(select.name, id(into))}"
    for block in itertools.product(*(range(len(c)) for c in out_chunks)):
        graph[(name, *block)] = (_block_of, into, ch.block_slices(out_chunks, block), needs.get(block, []))
    return da.Array(graph, name, out_chunks, dtype=select.dtype)


def _block_of(into: np.ndarray, region: tuple[slice, ...], _done: list) -> np.ndarray:
    """The task of one block of `direct_array`: its part of `into`, once the reads it waits for
    (`_done`: their results, None each) have run."""
    return into[region]
