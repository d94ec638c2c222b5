"""The user-facing API: the functions docs/architecture.md lists, over `lazyfuel.Array`.

Every function accepts numpy arrays (and array-likes), dask arrays and lazyfuel arrays for data,
indices and masks, and returns a lazy `Array`; nothing runs until `.compute()`, `np.asarray(x)`,
`dask.compute(x)`, `.persist()` or `.to_zarr(...)`. Semantics are PyTorch's: negative dims, 0-d
arrays as one element along dim 0, indices of any integer dtype range-checked (IndexError naming
the value and its position; no wrap-around), float or bool indices and non-bool masks refused
(TypeError), shapes that do not fit refused (ValueError). Concrete indices and masks are checked
when the op is built; lazy ones when their chunks are computed.

The backend is chosen when an array is lowered to dask (`lazyfuel.config.backend`, through
`providers.available_backends`), and each task plans its chain against the default registry of
the process it runs in, under the `lazyfuel.config` blocks open where the graph was lowered.
`compute` and `persist` take any knob as a keyword (`y.compute(backend="cpu")`) for that call.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np

from lazyfuel import dlpack, zarr_io
from lazyfuel.array import OP_METHODS, Array, _data, _node
from lazyfuel.graph import ops
from lazyfuel.graph.explain import explain_node
from lazyfuel.graph.ir import Source
from lazyfuel.graph.resident import from_cuda
from lazyfuel.runtime import DefaultRuntime, _planner  # noqa: F401 - api._planner: the tests reset it

__all__ = ["Array", "DefaultRuntime", "asarray", "broadcast_to", "contiguous", "explain",
           "fft", "from_array", "from_zarr", "gather", "ifft", "index_select", "irfft", "masked_fill",
           "rfft", "transpose"]


def from_array(a: Any, chunks: Any = "auto") -> Array:
    """A lazy Array over a numpy array (or array-like, or dask array), cut into `chunks`.

    `chunks` is anything dask's `from_array` takes ("auto", an int, a tuple per axis). A DLPack
    producer on the CPU (a torch CPU tensor, a host-visible `DeviceArray`) is read in place through
    `np.from_dlpack`: the data is not copied; its chunks reach kernels as numpy views. One on a
    CUDA GPU (a torch / CuPy CUDA tensor) is copied now, device to device, into blocks in Vulkan
    device memory on the same GPU (as `persist(device=True)` holds them: no upload, no host round
    trip; `graph/resident.py:from_cuda`), NotImplementedError where Vulkan and CUDA do not share
    the GPU; on another device a NotImplementedError naming it. Data in non-native byte order (`>i4`)
    is converted to native order chunk by chunk as it is read (`lf.explain` says so). TypeError
    for a dtype lazyfuel does not handle (e.g. float128, datetime64).

    >>> x = from_array(np.arange(6, dtype=np.float32).reshape(2, 3), chunks=(1, 3))
    >>> x.chunks
    ((1, 1), (3,))
    """
    if _dlpack_kind(a) == dlpack.CUDA:
        return Array(Source(from_cuda(a, chunks, DefaultRuntime.current())))
    return Array(ops.source(_node(_from_dlpack(a)), chunks))


def _dlpack_kind(a: Any) -> int | None:
    """The DLPack device type of a producer that is not a numpy or dask array (None otherwise)."""
    if isinstance(a, (np.ndarray, da.Array, Array)) or not hasattr(a, "__dlpack__"):
        return None
    return int(a.__dlpack_device__()[0])


def _from_dlpack(a: Any) -> Any:
    """A DLPack producer that is not a numpy or dask array (a torch tensor, a DeviceArray) as
    numpy: CPU ones read in place (`np.from_dlpack`); others but CUDA are refused, naming the device."""
    kind = _dlpack_kind(a)
    if kind is None:
        return a
    if kind in (dlpack.CPU, dlpack.CUDA_HOST):
        return np.from_dlpack(a)
    raise NotImplementedError(
        f"from_array of a DLPack tensor on {dlpack.NAMES.get(kind, f'device type {kind}')} "
        f"{int(a.__dlpack_device__()[1])}: only CPU and CUDA tensors are read; copy it to the host "
        "first (e.g. np.asarray)")


def from_zarr(store_or_path: Any, component: str | None = None) -> Array:
    """A lazy Array over a zarr array (a path, URL or store; `component` inside a group).

    Raises `completion.IncompleteStoreError` (a ValueError) for an array `to_zarr` began and did
    not finish: its run failed, or is still running. An array `to_zarr` finished is read with
    every chunk checked against what was written: `integrity.DamagedStoreError` (a ValueError)
    names a chunk that is missing, truncated, corrupted or swapped, or metadata that disagrees
    (a select of a few rows of a chunk stored raw reads only their bytes: `graph.stored.read_rows`)."""
    if isinstance(store_or_path, Path):
        store_or_path = str(store_or_path)
    z, reader = zarr_io.open_checked(store_or_path, component)
    if reader is z:  # no checksums of lazyfuel's to check: selects read rows where they lie (graph.stored)
        return Array(ops.zarr_source(z))
    return Array(ops.zarr_source(reader, zarr_io.verified(store_or_path, component, z, reader)))


def asarray(obj: Any) -> Array:
    """`obj` as a lazy Array: a lazyfuel Array as it is, a dask array wrapped, else `from_array`."""
    return obj if isinstance(obj, Array) else Array(_data(obj))


def index_select(x: Any, dim: int, indices: Any) -> Array:
    """`x` with `shape[dim] = len(indices)`: out[..., i, ...] = x[..., indices[i], ...]; lazy.

    `indices`: 1-d (or 0-d: one index), any integer dtype; numpy, dask or lazyfuel. `dim` may be
    negative. Along a chunked axis each output block reads only the chunks its indices hit.

    Raises:
        IndexError: `dim` out of range; an index < 0 or >= x.shape[dim] (value and position),
            at build time for concrete indices, at compute time for lazy ones.
        TypeError: float or bool indices.
        ValueError: indices of more than one dim.

    >>> import numpy as np
    >>> index_select(np.arange(6, dtype=np.float32).reshape(2, 3), 1, [2, 0]).compute()
    array([[2., 0.],
           [5., 3.]], dtype=float32)
    """
    return asarray(x).index_select(dim, indices)


def gather(x: Any, dim: int, indices: Any) -> Array:
    """out[i][j][k] = x[i][indices[i][j][k]][k] (for dim 1); the output has `indices`' shape; lazy.

    `indices` has `x`'s rank and `x`'s extent on every axis but `dim`; any integer dtype. Works
    along a chunked axis (dask's `take_along_axis` does not).

    Raises:
        IndexError: `dim` out of range, an index out of range (value and position).
        TypeError: float or bool indices.
        ValueError: the index shape does not fit `x` (expected and got).

    >>> gather(np.array([[1.0, 2.0], [3.0, 4.0]]), 1, [[0, 0], [1, 0]]).compute()
    array([[1., 1.],
           [4., 3.]])
    """
    return asarray(x).gather(dim, indices)


def masked_fill(x: Any, mask: Any, value: Any) -> Array:
    """`x` with `value` (which x's dtype must hold exactly) where `mask` is true; lazy, blockwise.

    `mask` is bool; mask and `x` broadcast together (numpy rules), so the result has
    `np.where(mask, value, x)`'s shape: a mask larger than `x` stretches `x` up (a stride-0 view;
    new dims take a lazy mask's chunks, or dask's auto chunks). The mask is rechunked to the
    result's chunks; a broadcast mask stays a stride-0 view until a kernel needs it contiguous.

    Raises:
        TypeError: a mask that is not bool (a uint8 mask is refused, never reinterpreted), a
            fill value that is not a scalar number.
        ValueError: mask and `x` do not broadcast together; x's dtype cannot hold the value
            exactly (1.5 or 300 into uint8, NaN into int32, 2 into bool; `checks.fill_bytes`).

    >>> masked_fill(np.array([1.0, 2.0, 3.0]), np.array([True, False, True]), -1).compute()
    array([-1.,  2., -1.])
    """
    return asarray(x).masked_fill(mask, value)


def transpose(x: Any, axes: Any = None) -> Array:
    """`x` with axes permuted (reversed when None); a view, no data moves."""
    return Array(ops.transpose(_data(x), axes))


def broadcast_to(x: Any, shape: Any) -> Array:
    """`x` stretched to `shape` by numpy's rules; a stride-0 view. ValueError if it does not fit."""
    return asarray(x).broadcast_to(shape)


def contiguous(x: Any) -> Array:
    """An explicit Contiguize: `x` copied into fresh contiguous chunks by a kernel."""
    return asarray(x).contiguous()


def fft(x: Any, axis: int = -1, n: int | None = None, norm: str | None = None) -> Array:
    """`numpy.fft.fft(x, n, axis, norm)`, lazily; dtypes F32 -> C64, F64 -> C128, complex stays.

    The FFT family (fft, ifft, rfft, irfft) follows numpy.fft: `axis` may be negative, the axis is
    cropped or zero-padded to `n` points, `norm` is None ("backward"), "ortho" or "forward". The
    axis is made one chunk (rechunked if needed); other axes keep theirs. Runs on the FFT provider
    the planner picks (VkFFT on OpenCL, else numpy.fft), each row within the binding's declared
    precision; selects feeding it run in their own task and hand it their result through host
    memory (`explain` shows the crossing). Errors at build time: TypeError for other dtypes (ints,
    F16, BF16: cast first, nothing is cast silently), IndexError (axis), ValueError (0-d x, n < 1,
    unknown norm).

    >>> fft(np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)).compute()
    array([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j], dtype=complex64)
    """
    return asarray(x).fft(axis, n, norm)


def ifft(x: Any, axis: int = -1, n: int | None = None, norm: str | None = None) -> Array:
    """`numpy.fft.ifft(x, n, axis, norm)`, lazily; as `fft` (same dtypes and errors)."""
    return asarray(x).ifft(axis, n, norm)


def rfft(x: Any, axis: int = -1, n: int | None = None, norm: str | None = None) -> Array:
    """`numpy.fft.rfft(x, n, axis, norm)`, lazily: the `n // 2 + 1` non-negative frequencies;
    as `fft`, but F32 -> C64 and F64 -> C128 only (complex input: TypeError, as numpy).

    >>> rfft(np.array([1.0, 2.0, 3.0, 4.0])).compute()
    array([10.+0.j, -2.+2.j, -2.+0.j])
    """
    return asarray(x).rfft(axis, n, norm)


def irfft(x: Any, axis: int = -1, n: int | None = None, norm: str | None = None) -> Array:
    """`numpy.fft.irfft(x, n, axis, norm)`, lazily: `n` real points (default 2 * (m - 1));
    as `fft`, but C64 -> F32 and C128 -> F64 only (real input: TypeError; numpy casts it).
    """
    return asarray(x).irfft(axis, n, norm)


def explain(x: Any, device: bool = False) -> str:
    """Each fused task group of `x`: the ops fused, the bindings the planner chooses for a
    representative block, the Contiguize steps inserted and why (which cap), and the estimated
    cost, with the candidate plans priced for each decision. With `device=True`, planned as
    `x.compute(device=True)` runs it (the result kept in device memory). Plans only; runs nothing."""
    arr = asarray(x)
    runtime = DefaultRuntime.current()
    return explain_node(arr._node, runtime, runtime.planner(), device=device)


def _op_function(name: str, method: Callable[..., Array]) -> Callable[..., Array]:
    """`lf.<name>(x, ...)`: `asarray(x).<name>(...)`, with the method's docstring and signature
    (`x: Any` for `self`)."""

    def function(x: Any, *args: Any, **kwargs: Any) -> Array:
        return method(asarray(x), *args, **kwargs)

    signature = inspect.signature(method)
    params = list(signature.parameters.values())
    function.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[inspect.Parameter("x", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation="Any"),
                    *params[1:]])
    function.__name__ = function.__qualname__ = name
    function.__doc__ = method.__doc__
    return function


# the functions of the ops that declare their graph builder (`array.OP_METHODS`); lazyfuel exports them
OP_FUNCTIONS: dict[str, Callable[..., Array]] = {
    name: _op_function(name, method) for name, method in OP_METHODS.items()}
globals().update(OP_FUNCTIONS)
__all__ += list(OP_FUNCTIONS)
