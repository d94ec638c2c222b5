"""Decoding a compressed zarr chunk a window at a time: the rows wanted, never the whole chunk.

numcodecs decodes a chunk whole, into a buffer of the chunk's size (64 MiB for the benchmark's
chunks): with one such buffer per read thread, the decode buffers alone held more than the
result of a 262k-row select. A zstd frame can be decoded as a stream instead (the system's
`libzstd`, through ctypes, which lets other threads run while it decodes): `zstd_rows` decodes
into one small window (`WINDOW_BYTES`, whole rows), copies out the wanted rows that window holds,
and goes on with the next, so a read thread holds the compressed bytes and one window.

A blosc chunk (blosc 1 format) is a header, the offset of each block (32 KiB or so) and the
blocks, each compressed apart: `blosc_rows` decodes only the blocks the wanted rows lie in, a
window of them at a time, and undoes the byte shuffle of the window in one numpy pass. It reads
blosc chunks whose blocks are zstd (or stored raw) with no shuffle or the byte shuffle; any other
(`BloscUnsupported`: lz4, blosclz, bitshuffle, delta) the caller decodes whole.

`zstd_available()` says whether `libzstd` was found; without it the caller decodes whole.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import threading
from functools import cache

import numpy as np

WINDOW_BYTES = 4 * 2**20
"""About how much of a chunk is decoded at once (rounded to whole rows)."""


class _Buffer(ctypes.Structure):
    """zstd's `ZSTD_inBuffer` / `ZSTD_outBuffer`: a pointer, its size, how far it is used."""

    _fields_ = [("ptr", ctypes.c_void_p), ("size", ctypes.c_size_t), ("pos", ctypes.c_size_t)]


@cache
def _libzstd() -> ctypes.CDLL | None:
    """The system's libzstd with the streaming calls' signatures set, or None."""
    name = ctypes.util.find_library("zstd")
    if name is None:
        return None
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        return None
    lib.ZSTD_createDCtx.restype = ctypes.c_void_p
    lib.ZSTD_freeDCtx.argtypes = [ctypes.c_void_p]
    lib.ZSTD_DCtx_reset.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.ZSTD_DCtx_reset.restype = ctypes.c_size_t
    lib.ZSTD_decompressStream.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Buffer), ctypes.POINTER(_Buffer)]
    lib.ZSTD_decompressStream.restype = ctypes.c_size_t
    lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
    lib.ZSTD_isError.restype = ctypes.c_uint
    lib.ZSTD_getErrorName.argtypes = [ctypes.c_size_t]
    lib.ZSTD_getErrorName.restype = ctypes.c_char_p
    lib.ZSTD_decompress.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t]
    lib.ZSTD_decompress.restype = ctypes.c_size_t
    lib.ZSTD_decompressDCtx.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                                        ctypes.c_size_t]
    lib.ZSTD_decompressDCtx.restype = ctypes.c_size_t
    return lib


def zstd_available() -> bool:
    """Whether zstd frames can be decoded a window at a time here (libzstd found)."""
    return _libzstd() is not None


class _Contexts(threading.local):
    """One zstd decoding context per thread, kept for its next chunk."""

    def __init__(self) -> None:
        self.ctx: int | None = None
        self.window: np.ndarray | None = None

    def context(self, lib: ctypes.CDLL) -> int:
        """This thread's decoding context, reset for a new frame."""
        if self.ctx is None:
            self.ctx = lib.ZSTD_createDCtx()
            if not self.ctx:
                raise MemoryError("libzstd could not create a decoding context")
        lib.ZSTD_DCtx_reset(self.ctx, 1)  # ZSTD_reset_session_only: a new frame
        return self.ctx

    def get(self, lib: ctypes.CDLL, window_bytes: int) -> tuple[int, np.ndarray]:
        """This thread's context and its window of `window_bytes` for streaming."""
        self.context(lib)
        if self.window is None or self.window.nbytes != window_bytes:
            self.window = np.empty(window_bytes, np.uint8)
        return self.ctx, self.window


_CONTEXTS = _Contexts()

TAKE_MODE = "clip"
"""How rows picked by positions known to be in range are taken into an `out=`: numpy's
`np.take(..., out=)` in its default mode ("raise") fills a buffer and copies it to `out`,
"clip" writes `out` itself: 3.5x faster for 8,000 rows of 1 KiB (8 vs 28 ms, session 9)."""

def _rows_view(out: np.ndarray, count: int, dest: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    """`out` as rows of bytes, and where wanted row i goes in it: row i (`dest` None; `out` has
    `count` rows) or row `dest[i]` (`out` C-contiguous, its rows whole rows of the chunk), `dest`
    then None when it is `count` consecutive rows from its first (the rows go to a slice)."""
    if dest is None:
        return out.reshape(count, -1).view(np.uint8), None
    if not out.flags.c_contiguous:
        raise ValueError("rows decoded into place need a C-contiguous array")
    flat = out.reshape(out.shape[0], -1).view(np.uint8)
    if dest.size and int(dest[-1]) - int(dest[0]) == dest.size - 1 and bool(np.all(np.diff(dest) == 1)):
        return flat[int(dest[0]):int(dest[0]) + dest.size], None
    return flat, dest


def _at(dest: np.ndarray | None, lo: int, hi: int) -> slice | np.ndarray:
    """The rows of `_rows_view`'s array that wanted rows lo:hi go to."""
    return slice(lo, hi) if dest is None else dest[lo:hi]


def _put(flat: np.ndarray, dest: np.ndarray | None, lo: int, hi: int, src: np.ndarray,
         picks: np.ndarray) -> None:
    """Rows `picks` of `src` (rows of bytes) as wanted rows lo:hi (`_rows_view`): one copy."""
    if dest is None:
        np.take(src, picks, axis=0, out=flat[lo:hi], mode=TAKE_MODE)
    else:
        flat[dest[lo:hi]] = src[picks]


def zstd_rows(compressed: np.ndarray, row_bytes: int, total_rows: int, rows: np.ndarray,
              out: np.ndarray, dest: np.ndarray | None = None) -> None:
    """Decode the zstd frame(s) `compressed` (uint8: a chunk of `total_rows` rows of `row_bytes`
    each) a window at a time, copying row `rows[i]` (ascending) to `out[i]` (a C-contiguous
    array of `rows.size` rows of `row_bytes`, any dtype), or with `dest` straight to
    `out[dest[i]]` (`out` any number of such rows: the result itself, no array of the rows
    between). ValueError when the bytes are not zstd or do not decode to exactly `total_rows`
    rows."""
    lib = _libzstd()
    if rows.size == 0:
        return
    if lib is None:
        raise RuntimeError("libzstd is not available (zstd_available() is False)")
    per_window = max(1, WINDOW_BYTES // row_bytes)
    ctx, window = _CONTEXTS.get(lib, per_window * row_bytes)
    src = np.ascontiguousarray(compressed, np.uint8).reshape(-1)
    source = _Buffer(src.ctypes.data, src.nbytes, 0)
    target = _Buffer(window.ctypes.data, window.nbytes, 0)
    flat, dest = _rows_view(out, rows.size, dest)
    stored = window.reshape(per_window, row_bytes)
    first, done, left = 0, 0, 1
    while True:
        target.pos = 0
        while target.pos < target.size and (source.pos < source.size or left):
            left = lib.ZSTD_decompressStream(ctx, ctypes.byref(target), ctypes.byref(source))
            if lib.ZSTD_isError(left):
                raise ValueError(f"zstd cannot decode the chunk: {lib.ZSTD_getErrorName(left).decode()}")
            if source.pos == source.size and left and target.pos < target.size:
                raise ValueError("the zstd frame ends early: the chunk is truncated")
        got = target.pos // row_bytes
        if target.pos % row_bytes or done + got > total_rows:
            raise ValueError(f"the chunk decodes to {done * row_bytes + target.pos} bytes, not "
                             f"{total_rows * row_bytes} ({total_rows} rows of {row_bytes} bytes)")
        end = int(np.searchsorted(rows, done + got))
        if end > first:
            _put(flat, dest, first, end, stored, rows[first:end] - done)
        first, done = end, done + got
        if got < per_window or (done == total_rows and source.pos == source.size and not left):
            break
    if done != total_rows or source.pos != source.size:
        raise ValueError(f"the chunk decodes to {done * row_bytes} bytes, not {total_rows * row_bytes} "
                         f"({total_rows} rows of {row_bytes} bytes)")


class BloscUnsupported(ValueError):
    """A blosc chunk `blosc_rows` does not read (its codec or filter): decode it whole instead."""


_SHUFFLE, _MEMCPYED, _BITSHUFFLE, _DELTA, _DONT_SPLIT = 0x1, 0x2, 0x4, 0x8, 0x10
_ZSTD = 4  # blosc's compressor format number of zstd (flags >> 5)


def blosc_rows(chunk: np.ndarray, row_bytes: int, total_rows: int, rows: np.ndarray, out: np.ndarray,
               dest: np.ndarray | None = None) -> None:
    """Copy row `rows[i]` (ascending) of the blosc chunk `chunk` (uint8, `total_rows` rows of
    `row_bytes`) to `out[i]` (C-contiguous, `rows.size` rows), or with `dest` to `out[dest[i]]`
    (as `zstd_rows`), decoding only the blocks those rows lie in. BloscUnsupported for chunks it
    does not read (raised before any row is written); ValueError for damaged ones."""
    lib = _libzstd()
    src = np.ascontiguousarray(chunk, np.uint8).reshape(-1)
    if src.size < 16:
        raise ValueError(f"a blosc chunk of {src.size} bytes has no header")
    flags, typesize = int(src[2]), int(src[3])
    nbytes, blocksize, cbytes = (int(v) for v in src[4:16].view("<i4"))
    if nbytes != total_rows * row_bytes or cbytes > src.size or blocksize <= 0:
        raise ValueError(f"the blosc chunk holds {nbytes} bytes in {cbytes}, not {total_rows * row_bytes} "
                         f"bytes in {src.size}")
    if rows.size == 0:
        return
    flat, dest = _rows_view(out, rows.size, dest)
    if flags & _MEMCPYED:  # stored raw after the header
        _put(flat, dest, 0, rows.size, src[16:16 + nbytes].reshape(total_rows, row_bytes), rows)
        return
    if lib is None or flags & (_BITSHUFFLE | _DELTA) or flags >> 5 != _ZSTD:
        raise BloscUnsupported(f"blosc flags {flags:#04x}: only zstd blocks with no shuffle or the byte "
                               "shuffle are read a window at a time")
    nblocks = -(-nbytes // blocksize)
    starts = src[16:16 + 4 * nblocks].view("<i4").astype(np.int64)
    if starts.size != nblocks or starts.min() < 16 + 4 * nblocks or starts.max() >= cbytes:
        raise ValueError("the blosc chunk's block offsets lie outside it: it is damaged")
    unit = math.lcm(blocksize, row_bytes)  # windows of whole blocks and whole rows
    per_window = nblocks if unit >= nbytes else max(1, WINDOW_BYTES // unit) * unit // blocksize
    window = np.empty(per_window * blocksize, np.uint8)
    first_block = rows * row_bytes // blocksize
    last_block = ((rows + 1) * row_bytes - 1) // blocksize
    marks = np.zeros(nblocks + 1, np.int64)  # +1 where a row's blocks start, -1 past their end
    np.add.at(marks, first_block, 1)
    np.add.at(marks, last_block + 1, -1)
    wanted = np.cumsum(marks[:-1]) > 0
    split = not flags & _DONT_SPLIT
    shuffled = bool(flags & _SHUFFLE) and typesize > 1
    in_place = shuffled and blocksize % row_bytes == 0 and row_bytes % typesize == 0  # rows within blocks
    done = 0
    for w0 in range(0, nblocks, per_window):
        w1 = min(w0 + per_window, nblocks)
        end_byte = min(w1 * blocksize, nbytes)
        stop = int(np.searchsorted(rows, end_byte // row_bytes))  # windows end on a row's end
        if stop == done:
            continue
        hit = np.flatnonzero(wanted[w0:w1]) + w0
        if split:
            for b in hit.tolist():
                size = min(blocksize, nbytes - b * blocksize)
                at = (b - w0) * blocksize
                streams = typesize if size == blocksize else 1
                _blosc_block(lib, src, int(starts[b]), window[at:at + size], streams)
        else:
            _blosc_blocks(lib, src, starts, hit, w0, blocksize, nbytes, window)
        if shuffled:
            for b in hit.tolist():
                size = min(blocksize, nbytes - b * blocksize)
                if not (in_place and size == blocksize):
                    at = (b - w0) * blocksize
                    _unshuffle(window[at:at + size], typesize)
        local = rows[done:stop] * row_bytes - w0 * blocksize  # each row's first byte in the window
        if in_place:
            _unshuffled_rows(window, blocksize, typesize, row_bytes, local, nbytes - w0 * blocksize,
                             flat, _at(dest, done, stop))
        else:
            _put(flat, dest, done, stop, window.reshape(-1, row_bytes), local // row_bytes)
        done = stop


def _blosc_blocks(lib: ctypes.CDLL, src: np.ndarray, starts: np.ndarray, hit: np.ndarray, w0: int,
                  blocksize: int, nbytes: int, window: np.ndarray) -> None:
    """Decode blocks `hit` (one stream each) into `window`, which starts at block `w0`: the
    stream sizes read at once, then one libzstd call per block, on raw pointers."""
    if hit.size == 0:
        return
    at = starts[hit]
    if int(at.max()) + 4 > src.size:
        raise ValueError("a blosc block lies past the end of the chunk: it is truncated")
    csizes = src[at[:, None] + np.arange(4)].copy().view("<i4").reshape(-1).astype(np.int64)
    sizes = np.minimum(blocksize, nbytes - hit * blocksize)
    if (csizes < 0).any() or int((at + 4 + csizes).max()) > src.size:
        raise BloscUnsupported("a blosc stream this reader does not know (negative or past the chunk)")
    source, target = src.ctypes.data, window.ctypes.data
    ctx = _CONTEXTS.context(lib)
    decompress, is_error = lib.ZSTD_decompressDCtx, lib.ZSTD_isError
    for b, start, csize, size in zip(hit.tolist(), at.tolist(), csizes.tolist(), sizes.tolist()):
        into = (b - w0) * blocksize
        if csize == size:  # stored raw
            window[into:into + size] = src[start + 4:start + 4 + size]
            continue
        got = decompress(ctx, target + into, size, source + start + 4, csize)
        if got != size:
            reason = lib.ZSTD_getErrorName(got).decode() if is_error(got) else f"{got} bytes"
            raise ValueError(f"a blosc block does not decode ({reason}): the chunk is damaged")


def _blosc_block(lib: ctypes.CDLL, src: np.ndarray, start: int, into: np.ndarray, streams: int) -> None:
    """Decode one blosc block (at byte `start` of `src`, in `streams` streams) into `into`."""
    each = into.size // streams
    for k in range(streams):
        part = into[k * each:(k + 1) * each if k < streams - 1 else into.size]
        if start + 4 > src.size:
            raise ValueError("a blosc block lies past the end of the chunk: it is truncated")
        csize = int(src[start:start + 4].view("<i4")[0])
        start += 4
        if csize < 0 or start + csize > src.size:
            raise BloscUnsupported(f"a blosc stream of {csize} bytes at {start}: not one this reader knows")
        if csize == part.size:  # stored raw
            part[...] = src[start:start + csize]
        else:
            got = lib.ZSTD_decompress(part.ctypes.data, part.size, src[start:].ctypes.data, csize)
            if lib.ZSTD_isError(got) or got != part.size:
                reason = lib.ZSTD_getErrorName(got).decode() if lib.ZSTD_isError(got) else f"{got} bytes"
                raise ValueError(f"a blosc block does not decode ({reason}): the chunk is damaged")
        start += csize


def _unshuffled_rows(window: np.ndarray, blocksize: int, typesize: int, row_bytes: int, starts: np.ndarray,
                     left: int, flat: np.ndarray, at: slice | np.ndarray) -> None:
    """The rows starting at bytes `starts` of `window` (whole blocks, byte-shuffled; whole rows
    in each block, `blocksize` a multiple of `row_bytes`) into rows `at` of `flat` (rows of
    bytes), unshuffling only those rows' bytes. A row of the chunk's last block when it is short
    (`left`: bytes from the window's start to the chunk's end) was unshuffled with its block
    already: it is copied as it is.

    A full block's byte k of element e lies at `k * each + e` (`each` elements a block), so its
    row r is the `typesize` runs of `row_bytes / typesize` bytes at `k * each + r * per_row`:
    the blocks seen as (block, byte k, row, element) take each wanted row's runs in one gather,
    then each byte plane goes to its stride in the rows (2.9 GB/s of rows against 0.4 GB/s for
    one gather of every byte by its own index: out_of_core session 9)."""
    short = left % blocksize and left < window.size
    tail = starts >= left - left % blocksize if short else np.zeros(starts.shape, bool)
    full = ~tail
    rows_at = np.arange(at.start, at.stop) if isinstance(at, slice) else at
    if full.any():
        per_row, per_block = row_bytes // typesize, blocksize // row_bytes
        blocks = window[:window.size // blocksize * blocksize].reshape(-1, typesize, per_block, per_row)
        begin = starts[full]
        runs = blocks[begin // blocksize, :, (begin % blocksize) // row_bytes]  # (rows, byte k, element)
        whole = isinstance(at, slice) and not tail.any()  # the rows go to a slice: unshuffled there
        rows = flat[at] if whole else np.empty((begin.size, row_bytes), np.uint8)
        planes = rows.reshape(-1, per_row, typesize)
        for k in range(typesize):
            planes[:, :, k] = runs[:, k, :]
        if not whole:  # one scatter (a gather of planes into scattered rows holds the GIL, 5x slower)
            flat[rows_at[full]] = rows
    if tail.any():
        flat[rows_at[tail]] = window[starts[tail, None] + np.arange(row_bytes)]


def _unshuffle(block: np.ndarray, typesize: int) -> None:
    """Undo blosc's byte shuffle of one block in place (its tail of under `typesize` bytes stays)."""
    n = block.size // typesize
    if typesize > 1 and n:
        block[:n * typesize] = block[:n * typesize].reshape(typesize, n).T.reshape(-1)
