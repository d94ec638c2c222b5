"""`lazyfuel.Array`: a lazy n-d array over a node of lazyfuel's graph; its description (shape,
dtype, chunks), its ops as methods (each builds one graph node, as the `lazyfuel.api` function of
the same name does), running it (`compute`, `persist`, `to_zarr`, `np.asarray`) and the dask
collection protocol. The module functions and constructors are `lazyfuel.api`'s.
"""

from __future__ import annotations

import inspect
import math
import sys
from collections.abc import Callable
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
from lazyfuel.graph.file_spans import READ_THREADS
from lazyfuel.graph.grouping import local_workers
from lazyfuel.graph.held import overlapping
from lazyfuel.graph.held_run import HeldRun, usable
from lazyfuel.graph.ir import Deferred, Node, Source
from lazyfuel.graph.lower import lower, lower_into
from lazyfuel.graph.passes import write_slabs
from lazyfuel.graph.placed import Plan, placing
from lazyfuel.graph.resident import assembled, device_workers, on_device, plan_of, result_holder
from lazyfuel.graph.stored import direct_array, read_budget, reads_directly
from lazyfuel.ops.homes import declared
from lazyfuel.runtime import DefaultRuntime
from lazyfuel.settings import config


class Array:
    """A lazy n-d array: a node of lazyfuel's graph, lowered to dask when computed.

    `.shape .dtype .ndim .chunks` describe it without running anything. Methods mirror the
    module functions (`x.gather(dim, idx)` is `lf.gather(x, dim, idx)`); `x.T` and `x[::2, 1:]`
    are views. It is a dask collection: `dask.compute(x)` and `dask.persist(x)` work.
    """

    __slots__ = ("_given", "_held_runs", "_lowered", "_plans")

    def __init__(self, node: Node) -> None:
        self._given = node
        self._lowered: dict[DefaultRuntime, da.Array] = {}
        self._held_runs: dict[DefaultRuntime, HeldRun] = {}  # device persists on local threads
        self._plans: dict[DefaultRuntime, Plan | None] = {}  # compute(device=True)'s blocks' places

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

    # --- ops (lazyfuel.api's functions call these) -------------------------------------------
    @property
    def T(self) -> Array:  # noqa: N802 - numpy's name
        return self.transpose()

    def transpose(self, *axes: Any) -> Array:
        """`lf.transpose(self, axes)`; accepts `x.transpose(1, 0)` and `x.transpose((1, 0))`."""
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            axes = axes[0]
        return Array(ops.transpose(_data(self), axes or None))

    def __getitem__(self, key: Any) -> Array:
        return Array(ops.getitem(self._node, key))

    def index_select(self, dim: int, indices: Any) -> Array:
        return Array(ops.index_select(_data(self), dim, _indices(indices)))

    def gather(self, dim: int, indices: Any) -> Array:
        return Array(ops.gather(_data(self), dim, _indices(indices)))

    def masked_fill(self, mask: Any, value: Any) -> Array:
        return Array(ops.masked_fill(_data(self), _node(mask), value))

    def broadcast_to(self, shape: Any) -> Array:
        return Array(ops.broadcast_to(_data(self), shape))

    def contiguous(self) -> Array:
        return Array(ops.contiguous(_data(self)))

    def fft(self, axis: int = -1, n: int | None = None, norm: str | None = None) -> Array:
        return Array(fft_ops.transform(_data(self), "Fft", axis, n, norm))

    def ifft(self, axis: int = -1, n: int | None = None, norm: str | None = None) -> Array:
        return Array(fft_ops.transform(_data(self), "Ifft", axis, n, norm))

    def rfft(self, axis: int = -1, n: int | None = None, norm: str | None = None) -> Array:
        return Array(fft_ops.transform(_data(self), "Rfft", axis, n, norm))

    def irfft(self, axis: int = -1, n: int | None = None, norm: str | None = None) -> Array:
        return Array(fft_ops.transform(_data(self), "Irfft", axis, n, norm))

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
                    raise ValueError(f"compute(device={device!r}) returns a DeviceArray; out= is for host "
                                     "results")
                return self._on_device(dask_kwargs, where)
            return self._compute(out, dask_kwargs)

    def _on_device(self, dask_kwargs: dict[str, Any], device: int | None = None) -> Any:
        """The result as one DeviceArray on device number `device` (None: see `compute`), in the
        allocation reserved for it before the tasks run where they write their blocks in place
        (`graph/placed.py`)."""
        with config(_resident_shared=True):  # a one-block result is handed to CUDA as it lies
            workers = _resident_run(dask_kwargs)[2]
            with config(_resident=True, _device_threads=workers):
                runtime = DefaultRuntime.current()
                if runtime not in self._plans:  # the lowering's last layer: its blocks' places
                    self._plans[runtime] = plan_of(self.to_dask())
                plan = self._plans[runtime]
                runtime.planner()  # the process's backends registered (`result_holder` asks them)
            with placing(plan, result_holder(device)) as into:
                return assembled(self._persisted_on_device(dask_kwargs), device, into)

    def _persisted_on_device(self, dask_kwargs: dict[str, Any]) -> da.Array:
        """The dask array of this one persisted with every block in device memory."""
        dask_kwargs, scheduler, workers = _resident_run(dask_kwargs)
        with config(_resident=True, _device_threads=workers):
            runtime = DefaultRuntime.current()
            if not (config.reuse_device_graphs and usable(scheduler, dask_kwargs)):
                return on_device(self.to_dask(), runtime).persist(**{"optimize_graph": False, **dask_kwargs})
            run = self._held_runs.get(runtime)  # the same graph under the same settings: made once
            if run is None:
                run = self._held_runs[runtime] = HeldRun.of(on_device(self.to_dask(), runtime))
            return run.run(workers)

    def _compute(self, out: np.ndarray | None, dask_kwargs: dict[str, Any]) -> np.ndarray:
        node = self._node
        if out is not None:
            _check_out(out, node.shape, node.dtype)
            _check_out_apart(out, node)
        scheduler = _scheduler(dask_kwargs)
        if scheduler in (dask.threaded.get, dask.local.get_sync) and math.prod(node.shape):
            if scheduler is dask.threaded.get and reads_directly(node):  # tasks waiting on the disk:
                dask_kwargs = _threads(dask_kwargs, READ_THREADS)  # as many as the file reads' own pool
            result = np.empty(node.shape, node.dtype) if out is None else out
            found = lower_into(node, DefaultRuntime.current(), result, local_workers(scheduler, dask_kwargs))
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
        cut = write_slabs(self._node, read_budget()) if compute else None  # a select larger than read_budget
        if cut is not None:  # written slab by slab, each lowered when its turn comes
            whole = da.empty(self.shape, dtype=self.dtype, chunks=tuple(max(c) for c in self.chunks))
            slabs = (cut[0], ((start, _written(part)) for start, part in cut[1]))
            return zarr_io.write(whole, url, component, overwrite, compute, kwargs, slabs)
        arr = _written(self._node) if compute else self.to_dask()
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


def _scheduler(dask_kwargs: dict[str, Any]) -> Callable[..., Any]:
    """The dask scheduler a compute or persist with `dask_kwargs` runs on (`dask.base.get_scheduler`,
    dask's threads where it names none). Where neither the call nor `dask.config` names one and
    dask.distributed was never imported (so no client can be), that is dask's threads, decided
    here: `get_scheduler` tries `from distributed import get_client` on every call, which without
    distributed installed searches `sys.path` each time (~0.1-0.3 ms on the H200's host, before a
    repeated W3 persist's first submit; issue 18 W3) and with it asks for a client (~0.15 ms)."""
    if (dask_kwargs.get("scheduler") is None and sys.modules.get("distributed") is None
            and dask.config.get("scheduler", None) is None and dask.config.get("get", None) is None):
        return dask.threaded.get
    return get_scheduler(scheduler=dask_kwargs.get("scheduler")) or dask.threaded.get


def _device_threads(dask_kwargs: dict[str, Any]) -> dict[str, Any]:
    """`dask_kwargs` for a graph whose results stay on the devices: dask's threads set to
    `graph.resident.device_workers()` (see `_threads`)."""
    return _threads(dask_kwargs, device_workers())


def _resident_run(dask_kwargs: dict[str, Any]) -> tuple[dict[str, Any], Any, int | None]:
    """(`_device_threads(dask_kwargs)`, the scheduler, its threads) of a device persist: the
    threads are known here, so the lowering runs as many blocks per task as keep each busy."""
    dask_kwargs = _device_threads(dask_kwargs)
    scheduler = _scheduler(dask_kwargs)
    return dask_kwargs, scheduler, local_workers(scheduler, dask_kwargs)


def _threads(dask_kwargs: dict[str, Any], workers: int | None) -> dict[str, Any]:
    """`dask_kwargs` with dask's threads set to `workers` where neither the call nor `dask.config`
    names a scheduler or a thread count (a distributed client sets the scheduler: left as it is)."""
    if {"scheduler", "num_workers"} & dask_kwargs.keys() or dask.config.get("scheduler", None) is not None \
            or dask.config.get("num_workers", None) is not None:
        return dask_kwargs
    return dask_kwargs if workers is None else {**dask_kwargs, "num_workers": workers}


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


def _written(node: Node) -> da.Array:
    """The dask array `to_zarr` writes of `node`: a lone select over a zarr store read straight
    into one buffer (`stored.direct_array`: blocks written as soon as their rows are in), else
    its lowering."""
    direct = direct_array(node)
    return direct if direct is not None else Array(node).to_dask()


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



def _op_method(name: str, build: Callable[..., Node]) -> Callable[..., Array]:
    """`Array.<name>`: the graph builder `build(node, *args)` of an op applied to this array, with
    the builder's docstring and its signature (`self` for the node)."""

    def method(self: Array, *args: Any, **kwargs: Any) -> Array:
        return Array(build(_data(self), *args, **kwargs))

    signature = inspect.signature(build)
    params = list(signature.parameters.values())
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD), *params[1:]],
        return_annotation="Array")
    method.__name__, method.__qualname__, method.__doc__ = name, f"Array.{name}", build.__doc__
    return method


# an op with its own graph module (`graph/<op>.py`) declares its builder there as `FUNCTION`: it
# becomes `Array.<op>` (and `lf.<op>`, api.OP_FUNCTIONS), no edit here
OP_METHODS: dict[str, Callable[..., Array]] = {}
for _spec, _build in declared("lazyfuel.graph", "FUNCTION"):
    if hasattr(Array, _spec.name):
        raise TypeError(f"op {_spec.name}: lazyfuel/graph/{_spec.name}.py declares FUNCTION, but Array "
                        f"already has an attribute {_spec.name!r}; rename the op or drop FUNCTION")
    OP_METHODS[_spec.name] = _op_method(_spec.name, _build)
    setattr(Array, _spec.name, OP_METHODS[_spec.name])
