"""The user-facing API: `lazyfuel.Array` and the functions docs/architecture.md lists.

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

import math
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import dask.local
import dask.threaded
import numpy as np
from dask.base import get_scheduler

from lazyfuel import zarr_io
from lazyfuel.graph import fft as fft_ops
from lazyfuel.graph import ops
from lazyfuel.graph.explain import explain_node
from lazyfuel.graph.held import overlapping
from lazyfuel.graph.ir import Deferred, Node, Source
from lazyfuel.graph.lower import lower, lower_into
from lazyfuel.graph.resident import assembled, on_device
from lazyfuel.measured import measured_costs  # also gives new Vulkan pools the judge's kernel shapes
from lazyfuel.planner import Planner
from lazyfuel.providers import available_backends, default_registry, left_out
from lazyfuel.settings import config


@dataclass(frozen=True)
class DefaultRuntime:
    """The planner a task uses (the default registry over the backends `backend` names) and the
    `lazyfuel.config` values set by the blocks open where the graph was lowered (`overrides`),
    which its tasks run under (`applied`).

    Picklable (it travels inside tasks to dask workers); each process builds its planner once.
    """

    backend: str = "auto"
    overrides: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def current(cls) -> DefaultRuntime:
        """The runtime of the config in force here."""
        return cls(config.backend, config.overrides())

    def planner(self) -> Planner:
        return _planner(self.backend.lower())

    def applied(self) -> AbstractContextManager[Any]:
        """A block of the captured config values (what a task runs under)."""
        return config.applied(self.overrides)

    def __dask_tokenize__(self) -> tuple[str, str, str]:
        # what names it in task keys; dask's default for a dataclass pickles it on every lowering
        return ("lazyfuel.DefaultRuntime", self.backend, repr(self.overrides))


@cache
def _planner(choice: str) -> Planner:
    """The process's planner for `choice`: the default registry, with the judge's cached costs; it
    knows the backends left out and why, and (`auto`) mentions one once where work needs it."""
    registry, backends = default_registry(), available_backends(choice)
    return Planner(registry, backends, costs=measured_costs(registry, backends),
                   left_out=left_out(choice), mention_left_out=choice == "auto")


class Array:
    """A lazy n-d array: a node of lazyfuel's graph, lowered to dask when computed.

    `.shape .dtype .ndim .chunks` describe it without running anything. Methods mirror the
    module functions (`x.gather(dim, idx)` is `lf.gather(x, dim, idx)`); `x.T` and `x[::2, 1:]`
    are views. It is a dask collection: `dask.compute(x)` and `dask.persist(x)` work.
    """

    __slots__ = ("_given", "_lowered")

    def __init__(self, node: Node) -> None:
        self._given = node
        self._lowered: dict[DefaultRuntime, da.Array] = {}

    @property
    def _node(self) -> Node:
        """The graph node; a select on indices of unknown chunk sizes (`ir.Deferred`) is built
        for real here, on first use by anything but the description below."""
        if isinstance(self._given, Deferred):
            self._given = self._given.resolved
        return self._given

    # --- description (NaN along an axis whose size the indices will tell, as in dask) --------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._given.shape

    @property
    def dtype(self) -> np.dtype:
        return self._given.dtype

    @property
    def ndim(self) -> int:
        return self._given.ndim

    @property
    def chunks(self) -> tuple[tuple[int, ...], ...]:
        return self._given.chunks

    @property
    def size(self) -> int:
        if isinstance(self._given, Deferred):
            return math.nan
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def name(self) -> str:
        """A deterministic name of this array's graph."""
        return self._given.name

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self) -> str:
        return (f"lazyfuel.Array<{self._given.label}, shape={self.shape}, dtype={self.dtype}, "
                f"chunks={self.chunks}>")

    # --- ops (mirror the functions) ----------------------------------------------------------
    @property
    def T(self) -> Array:  # noqa: N802 - numpy's name
        return transpose(self)

    def transpose(self, *axes: Any) -> Array:
        """`lf.transpose(self, axes)`; accepts `x.transpose(1, 0)` and `x.transpose((1, 0))`."""
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            axes = axes[0]
        return transpose(self, axes or None)

    def __getitem__(self, key: Any) -> Array:
        return Array(ops.getitem(self._node, key))

    def index_select(self, dim: int, indices: Any) -> Array:
        return index_select(self, dim, indices)

    def gather(self, dim: int, indices: Any) -> Array:
        return gather(self, dim, indices)

    def masked_fill(self, mask: Any, value: Any) -> Array:
        return masked_fill(self, mask, value)

    def broadcast_to(self, shape: Any) -> Array:
        return broadcast_to(self, shape)

    def contiguous(self) -> Array:
        return contiguous(self)

    def fft(self, axis: int = -1, n: int | None = None, norm: str | None = None) -> Array:
        return fft(self, axis, n, norm)

    def ifft(self, axis: int = -1, n: int | None = None, norm: str | None = None) -> Array:
        return ifft(self, axis, n, norm)

    def rfft(self, axis: int = -1, n: int | None = None, norm: str | None = None) -> Array:
        return rfft(self, axis, n, norm)

    def irfft(self, axis: int = -1, n: int | None = None, norm: str | None = None) -> Array:
        return irfft(self, axis, n, norm)

    # --- running -----------------------------------------------------------------------------
    def to_dask(self) -> da.Array:
        """The dask array computing this one (built once per backend choice and config block);
        nothing runs."""
        runtime = DefaultRuntime.current()
        found = self._lowered.get(runtime)
        if found is None:
            found = self._lowered[runtime] = lower(self._node, runtime)
        return found

    def compute(self, out: np.ndarray | None = None, device: bool | int = False, **kwargs: Any) -> Any:
        """Run the graph; a numpy array (`out`, when given: a writeable array of this shape and
        dtype, any layout, not overlapping the inputs, reused as numpy's `out=` is). Keyword
        arguments that name a `lazyfuel.config` knob set it for this call (`backend="cpu"`); the
        others go to `dask.compute` (scheduler …).

        On dask's local schedulers (threads, sync) the result is allocated once (or is `out`) and
        each block is written into it by the task that computes it: by the kernels themselves
        where the block's region is contiguous (`Executor.run(out=)`), else copied there as soon
        as it is done. No block is held and no thread concatenates at the end. Elsewhere
        (dask.distributed) dask gathers the blocks and concatenates them (then copied into `out`).

        With `device=True` the result stays in Vulkan device memory: a `lazyfuel.DeviceArray`
        (`backends/vulkan/device_array.py`), the blocks kept on the device as `persist(device=True)`
        keeps them and assembled there into one allocation; `np.from_dlpack` reads it in place
        where the device's memory is host-visible (lavapipe, integrated GPUs). Over several devices
        (`lazyfuel.config.devices`) the blocks are gathered onto one: `device=1` names it (as
        torch's `cuda:1`: the number among the devices blocks are spread over), `device=True` takes
        the one holding most of the result's bytes (device 0 on a tie).
        """
        where = _device_choice(device)
        knobs, dask_kwargs = config.split(kwargs)
        with config(**knobs):
            if where is not False:
                if out is not None:
                    raise ValueError("compute(device=...) returns a DeviceArray; out= is for host results")
                return self._on_device(dask_kwargs, where)
            return self._compute(out, dask_kwargs)

    def _on_device(self, dask_kwargs: dict[str, Any], device: int | None = None) -> Any:
        """The result as one DeviceArray on device number `device` (None: see `compute`)."""
        return assembled(self._persisted_on_device(dask_kwargs), device)

    def _persisted_on_device(self, dask_kwargs: dict[str, Any]) -> da.Array:
        """The dask array of this one persisted with every block in device memory."""
        with config(_resident=True):
            runtime = DefaultRuntime.current()
            return on_device(self.to_dask(), runtime).persist(**dask_kwargs)

    def _compute(self, out: np.ndarray | None, dask_kwargs: dict[str, Any]) -> np.ndarray:
        node = self._node
        if out is not None:
            _check_out(out, node.shape, node.dtype)
            _check_out_apart(out, node)
        scheduler = get_scheduler(scheduler=dask_kwargs.get("scheduler")) or dask.threaded.get
        if scheduler in (dask.threaded.get, dask.local.get_sync) and math.prod(node.shape):
            result = np.empty(node.shape, node.dtype) if out is None else out
            found = lower_into(node, DefaultRuntime.current(), result)
            if found is not None:
                graph, keys = found
                kwargs = {k: v for k, v in dask_kwargs.items() if k != "scheduler"}
                scheduler(graph, keys, **kwargs)
                return result
        computed = np.asarray(self.to_dask().compute(**dask_kwargs))
        if out is None:
            return computed
        out[...] = computed
        return out

    def persist(self, device: bool = False, **kwargs: Any) -> Array:
        """An Array whose chunks are computed and held (in memory, or on a distributed cluster);
        keyword arguments as `compute`'s.

        With `device=True` each block is held in the device memory of the Vulkan pool that computed
        it (a task runs where its resident inputs lie, else block i on `task.device_for(i)`'s
        device; blocks computed elsewhere are copied there): the dask graph holds small handles
        (`backends/vulkan/residency.py`), graphs over the Array read the blocks where they lie (no
        upload; a Cpu step downloads a copy), least recently used blocks spill to host memory past
        `lazyfuel.config.device_memory_budget`, and the memory goes back when the last Array
        holding it goes (`graph/resident.py`). `device` takes True or False only: blocks are spread
        over the devices (`compute(device=N)` gathers a result onto device N)."""
        if not isinstance(device, (bool, np.bool_)):
            raise TypeError(f"persist(device={device!r}): device takes True (blocks kept in device memory, "
                            "each where it was computed) or False; to gather a result onto device N, "
                            "use compute(device=N)")
        knobs, dask_kwargs = config.split(kwargs)
        with config(**knobs):
            if device:
                return Array(Source(self._persisted_on_device(dask_kwargs)))
            return Array(Source(self.to_dask().persist(**dask_kwargs)))

    def to_zarr(self, url: Any, component: str | None = None, overwrite: bool = False,
                compute: bool = True, **kwargs: Any) -> Any:
        """Compute and store into a zarr array at `url` (a path or store); with `compute=False`
        the dask collection that does it.

        Never leaves a result that reads as complete before it is (`lazyfuel.zarr_io`): a local
        path is written beside itself and renamed into place when whole (an existing store stays
        until then; `overwrite=True` replaces a zarr store, never a folder that is not one, which
        is a FileExistsError); other stores carry `lazyfuel: {complete: false}` from their first
        metadata until the last chunk is in. Every chunk carries a crc32c and the marker records
        each chunk's, so `lf.from_zarr` detects missing, swapped and truncated chunks. Zarr chunks
        are regular, so uneven chunks (a reversed slice, a select's last block) are first
        rechunked to the largest chunk of each axis; keyword arguments go to zarr's
        `create_array` (TypeError for `return_stored`, `region`, `mode`, `chunks`, `shards`, and for a
        `zarr.Array` as `url`).
        """
        arr = self.to_dask()
        if not all(_regular(c) for c in arr.chunks):
            arr = arr.rechunk(tuple(max(c) for c in arr.chunks))
        return zarr_io.write(arr, url, component, overwrite, compute, kwargs)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        out = self.compute()
        return out if dtype is None else out.astype(dtype, copy=False)

    # --- the dask collection protocol: delegated to the lowered dask array -------------------
    def __dask_graph__(self) -> Any:
        return self.to_dask().__dask_graph__()

    def __dask_keys__(self) -> Any:
        return self.to_dask().__dask_keys__()

    def __dask_layers__(self) -> Any:
        return self.to_dask().__dask_layers__()

    def __dask_tokenize__(self) -> Any:
        return ("lazyfuel.Array", self._given.name, DefaultRuntime.current())

    def __dask_postcompute__(self) -> Any:
        return self.to_dask().__dask_postcompute__()

    def __dask_postpersist__(self) -> Any:
        rebuild, args = self.to_dask().__dask_postpersist__()
        return _persisted, (rebuild, args)

    @staticmethod
    def __dask_optimize__(dsk: Any, keys: Any, **kwargs: Any) -> Any:
        return da.Array.__dask_optimize__(dsk, keys, **kwargs)

    __dask_scheduler__ = staticmethod(dask.threaded.get)


def _device_choice(device: Any) -> int | bool | None:
    """`compute`'s `device`: False (a host result), None (a DeviceArray where most bytes lie) or a
    device number. TypeError for anything else, naming what is accepted."""
    if device is False or device is None:
        return False
    if device is True:
        return None
    if isinstance(device, (int, np.integer)) and not isinstance(device, bool) and device >= 0:
        return int(device)
    raise TypeError(f"compute(device={device!r}): device takes False (a numpy result), True (a "
                    "DeviceArray on the device holding most of it) or a device number >= 0 (a "
                    "DeviceArray there, as torch's cuda:N)")


def _check_out(out: Any, shape: tuple[int, ...], dtype: np.dtype) -> None:
    """ValueError / TypeError unless `out` is a writeable numpy array of `shape` and `dtype`."""
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy array, got {type(out).__name__}")
    if out.dtype != dtype:
        raise TypeError(f"out has dtype {out.dtype}; this array's dtype is {dtype}")
    if out.shape != tuple(shape):
        raise ValueError(f"out has shape {out.shape}; this array's shape is {tuple(shape)}")
    if not out.flags.writeable:
        raise ValueError("out is read-only; pass a writeable array")


def _check_out_apart(out: np.ndarray, node: Node) -> None:
    """ValueError when `out` shares memory with an array the graph reads: blocks written into it
    would overwrite values other blocks have still to read (numpy copies the input first; lazyfuel
    reads in place, so it refuses)."""
    found = overlapping(out, node)
    if found is not None:
        role, a = found
        raise ValueError(f"out shares memory with {role} (shape {a.shape}, {a.dtype}), which this "
                         "computation reads while it writes out; pass a new array (or a copy of the "
                         "input), or call compute() without out=")


def _regular(axis_chunks: tuple[int, ...]) -> bool:
    """Every chunk the same size but the last, which may be smaller (what zarr stores)."""
    return all(c == axis_chunks[0] for c in axis_chunks[:-1]) and axis_chunks[-1] <= axis_chunks[0]


def _persisted(dsk: Any, rebuild: Any, args: tuple[Any, ...], rename: Any = None) -> Array:
    arr = rebuild(dsk, *args, rename=rename) if rename else rebuild(dsk, *args)
    return Array(Source(arr))


def _node(x: Any) -> Any:
    """The graph node of a lazyfuel Array; anything else unchanged (ops decides what it is)."""
    return x._node if isinstance(x, Array) else x


def _indices(x: Any) -> Any:
    """Indices as the ops take them: a lazyfuel Array's node as it was given (indices of unknown
    chunk sizes stay so: the select on them is deferred too, `ops.unknown_sizes`)."""
    return x._given if isinstance(x, Array) else x


def _data(x: Any) -> Node:
    return ops.source(_node(x))


def from_array(a: Any, chunks: Any = "auto") -> Array:
    """A lazy Array over a numpy array (or array-like, or dask array), cut into `chunks`.

    `chunks` is anything dask's `from_array` takes ("auto", an int, a tuple per axis). A DLPack
    producer on the CPU (a torch CPU tensor, a host-visible `DeviceArray`) is read in place through
    `np.from_dlpack`; one on a GPU is a NotImplementedError naming the device. The data is
    not copied; its chunks reach kernels as numpy views. Data in non-native byte order (`>i4`)
    is converted to native order chunk by chunk as it is read (`lf.explain` says so). TypeError
    for a dtype lazyfuel does not handle (e.g. float128, datetime64).

    >>> x = from_array(np.arange(6, dtype=np.float32).reshape(2, 3), chunks=(1, 3))
    >>> x.chunks
    ((1, 1), (3,))
    """
    return Array(ops.source(_node(_from_dlpack(a)), chunks))


def _from_dlpack(a: Any) -> Any:
    """A DLPack producer that is not a numpy or dask array (a torch tensor, a DeviceArray) as
    numpy: CPU ones read in place (`np.from_dlpack`); others are refused, naming the device."""
    if isinstance(a, (np.ndarray, da.Array, Array)) or not hasattr(a, "__dlpack__"):
        return a
    kind, number = a.__dlpack_device__()
    if int(kind) in (_DL_CPU, _DL_CUDA_HOST):
        return np.from_dlpack(a)
    raise NotImplementedError(
        f"from_array of a DLPack tensor on {_DL_NAMES.get(int(kind), f'device type {int(kind)}')} "
        f"{int(number)}: reading device memory straight into Vulkan memory is not implemented; copy "
        "it to the host first (torch: t.cpu().numpy(); CuPy: cupy.asnumpy(a))")


_DL_CPU, _DL_CUDA_HOST = 1, 3  # dlpack.h device types the CPU reads in place
_DL_NAMES = {2: "CUDA", 4: "OpenCL", 7: "Vulkan", 8: "Metal", 10: "ROCm", 13: "CUDA managed memory",
             14: "oneAPI"}


def from_zarr(store_or_path: Any, component: str | None = None) -> Array:
    """A lazy Array over a zarr array (a path, URL or store; `component` inside a group).

    Raises `completion.IncompleteStoreError` (a ValueError) for an array `to_zarr` began and did
    not finish: its run failed, or is still running. An array `to_zarr` finished is read with
    every chunk checked against what was written: `integrity.DamagedStoreError` (a ValueError)
    names a chunk that is missing, truncated, corrupted or swapped, or metadata that disagrees."""
    if isinstance(store_or_path, Path):
        store_or_path = str(store_or_path)
    z, reader = zarr_io.open_checked(store_or_path, component)
    if reader is z:  # no checksums of lazyfuel's to check: selects read rows where they lie (graph.stored)
        return Array(ops.zarr_source(z))
    return Array(ops.source(zarr_io.verified(store_or_path, component, z, reader)))


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
    return Array(ops.index_select(_data(x), dim, _indices(indices)))


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
    return Array(ops.gather(_data(x), dim, _indices(indices)))


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
    return Array(ops.masked_fill(_data(x), _node(mask), value))


def transpose(x: Any, axes: Any = None) -> Array:
    """`x` with axes permuted (reversed when None); a view, no data moves."""
    return Array(ops.transpose(_data(x), axes))


def broadcast_to(x: Any, shape: Any) -> Array:
    """`x` stretched to `shape` by numpy's rules; a stride-0 view. ValueError if it does not fit."""
    return Array(ops.broadcast_to(_data(x), shape))


def contiguous(x: Any) -> Array:
    """An explicit Contiguize: `x` copied into fresh contiguous chunks by a kernel."""
    return Array(ops.contiguous(_data(x)))


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
    return Array(fft_ops.transform(_data(x), "Fft", axis, n, norm))


def ifft(x: Any, axis: int = -1, n: int | None = None, norm: str | None = None) -> Array:
    """`numpy.fft.ifft(x, n, axis, norm)`, lazily; as `fft` (same dtypes and errors)."""
    return Array(fft_ops.transform(_data(x), "Ifft", axis, n, norm))


def rfft(x: Any, axis: int = -1, n: int | None = None, norm: str | None = None) -> Array:
    """`numpy.fft.rfft(x, n, axis, norm)`, lazily: the `n // 2 + 1` non-negative frequencies;
    as `fft`, but F32 -> C64 and F64 -> C128 only (complex input: TypeError, as numpy).

    >>> rfft(np.array([1.0, 2.0, 3.0, 4.0])).compute()
    array([10.+0.j, -2.+2.j, -2.+0.j])
    """
    return Array(fft_ops.transform(_data(x), "Rfft", axis, n, norm))


def irfft(x: Any, axis: int = -1, n: int | None = None, norm: str | None = None) -> Array:
    """`numpy.fft.irfft(x, n, axis, norm)`, lazily: `n` real points (default 2 * (m - 1));
    as `fft`, but C64 -> F32 and C128 -> F64 only (real input: TypeError; numpy casts it).
    """
    return Array(fft_ops.transform(_data(x), "Irfft", axis, n, norm))


def explain(x: Any) -> str:
    """Each fused task group of `x`: the ops fused, the bindings the planner chooses for a
    representative block, the Contiguize steps inserted and why (which cap), and the estimated
    cost, with the candidate plans priced for each decision. Plans only; runs nothing."""
    arr = asarray(x)
    runtime = DefaultRuntime.current()
    return explain_node(arr._node, runtime, runtime.planner())
