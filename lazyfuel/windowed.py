"""Decoding a compressed zarr chunk a window at a time: the rows wanted, never the whole chunk.

numcodecs decodes a chunk whole, into a buffer of the chunk's size (64 MiB for the benchmark's
chunks): with one such buffer per read thread, the decode buffers alone held more than the
result of a 262k-row select. A zstd frame can be decoded as a stream instead (the system's
`libzstd`, through ctypes, which lets other threads run while it decodes): `zstd_rows` decodes
into one small window (`WINDOW_BYTES`, whole rows), copies out the wanted rows that window holds,
and goes on with the next, so a read thread holds the compressed bytes and one window.

`zstd_available()` says whether `libzstd` was found; without it the caller decodes whole.
"""

from __future__ import annotations

import ctypes
import ctypes.util
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
    return lib


def zstd_available() -> bool:
    """Whether zstd frames can be decoded a window at a time here (libzstd found)."""
    return _libzstd() is not None


class _Contexts(threading.local):
    """One zstd decoding context per thread, kept for its next chunk."""

    def __init__(self) -> None:
        self.ctx: int | None = None
        self.window: np.ndarray | None = None

    def get(self, lib: ctypes.CDLL, window_bytes: int) -> tuple[int, np.ndarray]:
        if self.ctx is None:
            self.ctx = lib.ZSTD_createDCtx()
            if not self.ctx:
                raise MemoryError("libzstd could not create a decoding context")
        lib.ZSTD_DCtx_reset(self.ctx, 1)  # ZSTD_reset_session_only: a new frame
        if self.window is None or self.window.nbytes != window_bytes:
            self.window = np.empty(window_bytes, np.uint8)
        return self.ctx, self.window


_CONTEXTS = _Contexts()


def zstd_rows(compressed: np.ndarray, row_bytes: int, total_rows: int, rows: np.ndarray,
              out: np.ndarray) -> None:
    """Decode the zstd frame(s) `compressed` (uint8: a chunk of `total_rows` rows of `row_bytes`
    each) a window at a time, copying row `rows[i]` (ascending) to `out[i]` (a C-contiguous
    array of `rows.size` rows of `row_bytes`, any dtype). ValueError when the bytes are not zstd
    or do not decode to exactly `total_rows` rows."""
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
    flat = out.reshape(rows.size, -1).view(np.uint8)
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
            np.take(stored, rows[first:end] - done, axis=0, out=flat[first:end])
        first, done = end, done + got
        if got < per_window or (done == total_rows and source.pos == source.size and not left):
            break
    if done != total_rows or source.pos != source.size:
        raise ValueError(f"the chunk decodes to {done * row_bytes} bytes, not {total_rows * row_bytes} "
                         f"({total_rows} rows of {row_bytes} bytes)")
