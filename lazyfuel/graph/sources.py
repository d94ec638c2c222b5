"""Graph leaves from user data: nodes as they are, dask arrays, numpy arrays viewed chunk by chunk
(no copy), zarr arrays; data in non-native byte order converted chunk by chunk as it is read.
"""

from __future__ import annotations

import dataclasses
import math
from itertools import product
from typing import Any

import dask.array as da
import numpy as np
from dask.array.core import normalize_chunks, slices_from_chunks
from dask.base import tokenize

from lazyfuel import checks
from lazyfuel.dtypes import DType, as_native, native
from lazyfuel.graph.ir import (
    Node,
    Source,
    resolved,
)
from lazyfuel.graph.lower import from_layer
from lazyfuel.graph.stored import regular_chunks


def is_lazy(obj: Any) -> bool:
    """A lazyfuel node or a dask array (values known only at compute time)."""
    return isinstance(obj, Node) or isinstance(obj, da.Array)


def source(obj: Any, chunks: Any = "auto", data: bool = True) -> Node:
    """`obj` as a node: nodes as they are, dask arrays (rechunked if `chunks` is given), numpy
    arrays and array-likes cut into `chunks` (dask's `from_array`). Data in non-native byte order
    (`>i4` on this machine) is converted to native order chunk by chunk where each chunk is read
    (`native_chunks`), and the Source says so (`stored`).

    Raises TypeError for a dtype lazyfuel does not handle (when `data`: indices may have any
    integer dtype), ValueError for unknown chunk sizes.
    """
    if isinstance(obj, Node):
        return resolved(obj)
    checks.refuse_masked(obj, "data" if data else "indices")
    one_buffer = not isinstance(obj, da.Array)
    host = None
    if isinstance(obj, da.Array):
        arr = obj if chunks == "auto" else obj.rechunk(chunks)
    else:
        host = np.asarray(obj)
        if data:
            DType.from_numpy(native(host.dtype))
        arr = numpy_source(host, chunks)
    stored = np.dtype(arr.dtype)
    if not stored.isnative:
        arr, one_buffer, host = native_chunks(arr), False, None
    if data:
        DType.from_numpy(arr.dtype)
    if any(math.isnan(n) for c in arr.chunks for n in c):
        raise ValueError("the dask array has unknown chunk sizes; call .compute_chunk_sizes() first")
    if da.array_expr_enabled():
        host = None  # `numpy_source` is dask's from_array there: chunks are copies, not views
    return Source(arr, one_buffer=one_buffer, stored=None if stored.isnative else stored, host=host)


def zarr_source(arr: Any, array: da.Array | None = None) -> Source:
    """A source over a zarr array (or the `integrity.VerifiedChunks` over one lazyfuel wrote, read
    through `array`, its verified dask array), cut into its chunks (a sharded array: its shards),
    that a select reads row by row (`graph.stored`)."""
    node = source(da.from_zarr(arr, chunks=regular_chunks(arr)) if array is None else array)
    return dataclasses.replace(node, zarr=arr)


def native_chunks(arr: da.Array) -> da.Array:
    """`arr` (non-native byte order) with each chunk converted to native order as it is read: one
    byte-swapping pass per chunk, in a task of its own that every reader of the chunk shares, so
    kernels only ever see native data."""
    want = native(arr.dtype)
    return arr.map_blocks(as_native, dtype=want, meta=np.empty((0,) * arr.ndim, want),
                          name="native-" + tokenize(arr.name, want.str))


def numpy_source(a: np.ndarray, chunks: Any = "auto") -> da.Array:
    """A dask array whose chunks are the views `a[slices]`: no copy, and no hash of the bytes.

    dask's `from_array` copies `a` and hashes all of its bytes to name the result (about 0.5 s
    for 256 MB here); lazyfuel promises not to copy, and names the array by its identity
    instead: the graph holds views of `a`, so no other live array can share its id and address.
    In dask's array-expression mode, which hashes every graph it is handed, `from_array` is kept.
    """
    if da.array_expr_enabled():
        return da.from_array(a, chunks=chunks)
    normal = normalize_chunks(chunks, a.shape, dtype=a.dtype)
    name = "array-" + tokenize("lazyfuel-view", id(a), a.__array_interface__["data"][0], a.shape,
                               a.strides, a.dtype.str, normal)
    blocks = product(*(range(len(c)) for c in normal))
    layer = {(name, *b): a[s] for b, s in zip(blocks, slices_from_chunks(normal))}
    return from_layer(name, layer, [], normal, a.dtype)
