"""A device graph run again without dask's per-call machinery (issue 18, W3: host time).

`persist(device=True)` / `compute(device=True)` of one Array under the same settings lowers to the
same dask graph each time (`Array.to_dask` keeps it per runtime). Persisting it through dask
then materialises the high-level graph, converts it, orders it and starts `get_async`: ~2-5 ms
before the first task runs, with the GPU idle. `HeldRun.of(arr)` does that work once (the
materialised, converted graph, its keys and its tasks by depth) and `run(workers)` evaluates
the same tasks with the same inputs in that order, each once its inputs are there: on a thread
pool of `workers` threads (a `run_blocks` batch of resident blocks, a block program, a copy to
the device), except a `getitem` (one block of a batch's tuple) and a `hold_block` whose block is
on a device already (it passes the block on), which run on the calling thread; the first task
error is raised as dask raises it (the task's own exception), after every submitted task has
finished. The result is a
dask array of the same name, keys, chunks, dtype and meta as dask's persist gives.

Where the graph is one layer of batched block programs whose every block joined one batch (W3's
shape), the run notes what each batch ran and later runs replay that instead of evaluating the
tasks (`graph/replay.py`, `config.replay_device_graphs`), while it can be the same run.

Only for dask's local schedulers (threads, sync) with no dask callbacks active and no other
scheduler arguments than `num_workers` (`usable`); anything else (dask.distributed, a progress
bar) keeps the dask path.
"""

from __future__ import annotations

import contextvars
import operator
import os
import threading
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import dask
import dask.array as da
import dask.array.core
import dask.local
import dask.threaded
from dask._task_spec import DataNode, GraphNode, convert_legacy_graph
from dask.callbacks import Callback
from dask.core import flatten

from lazyfuel.backends import base
from lazyfuel.graph import replay
from lazyfuel.graph.resident import hold_block
from lazyfuel.settings import config

# dask's wrapper of a map_blocks function given keywords (private: None where a dask lacks it, and
# then only direct calls are recognised, which is slower but the same result)
_KEYWORD_WRAPPER = getattr(dask.array.core, "_pass_extra_kwargs", None)
_POOLS: dict[tuple[int, int], ThreadPoolExecutor] = {}  # (process, threads): a fork makes its own
_POOLS_LOCK = threading.Lock()


def usable(scheduler: Any, dask_kwargs: Mapping[str, Any]) -> bool:
    """Whether a persist on `scheduler` with `dask_kwargs` may run as a `HeldRun`."""
    local = scheduler in (dask.threaded.get, dask.local.get_sync)
    return local and not Callback.active and set(dask_kwargs) <= {"scheduler", "num_workers"}


def _pool(workers: int) -> ThreadPoolExecutor:
    """The process's pool of `workers` threads (made once per size, as dask keeps its pools)."""
    key = (os.getpid(), workers)
    with _POOLS_LOCK:
        found = _POOLS.get(key)
        if found is None:
            found = _POOLS[key] = ThreadPoolExecutor(workers, thread_name_prefix="lazyfuel-held")
        return found


def calls(node: GraphNode, func: Any) -> bool:
    """Whether task `node` calls `func`: directly, or through dask's keyword wrapper (a
    `map_blocks` with keyword arguments, as `hold_block`'s layer is, calls `_pass_extra_kwargs`
    with `func` as its first argument)."""
    found = getattr(node, "func", None)
    if found is func:
        return True
    args = getattr(node, "args", ())
    wrapped = _KEYWORD_WRAPPER is not None and found is _KEYWORD_WRAPPER
    return wrapped and bool(args) and isinstance(args[0], DataNode) and args[0]() is func


def _levels(graph: Mapping[Hashable, GraphNode]) -> list[Hashable]:
    """The keys of `graph` by depth (data 0, a task one more than its deepest dependency), so
    every task of one depth is started before any task waits on one of them."""
    depth: dict[Hashable, int] = {}
    for root in graph:
        stack = [root]
        while stack:
            key = stack[-1]
            if key in depth:
                stack.pop()
                continue
            todo = [d for d in graph[key].dependencies if d not in depth]
            if todo:
                stack.extend(todo)
                continue
            depth[key] = 1 + max((depth[d] for d in graph[key].dependencies), default=-1)
            stack.pop()
    return sorted(graph, key=depth.__getitem__)


@dataclass(frozen=True)
class HeldRun:
    """One device graph, materialised and ordered once; see the module docstring."""

    graph: dict[Hashable, GraphNode]
    order: list[Hashable]  # by depth (`_levels`)
    inline: frozenset  # `getitem` tasks (a block of a batch's tuple): on the calling thread
    holds: frozenset  # `hold_block` tasks: on the calling thread where the block is on a device already
    keys: list[Hashable]
    template: da.Array  # name, chunks, dtype and meta of the result
    readers: dict[Hashable, int]  # how many tasks read each key
    _replay: list = field(default_factory=lambda: [None], compare=False)  # [the last run's Replay]

    @classmethod
    def of(cls, arr: da.Array) -> HeldRun:
        """`arr`'s graph prepared for `run` (nothing runs)."""
        graph = convert_legacy_graph(dict(arr.__dask_graph__()))

        def calling(func: Any) -> frozenset:
            return frozenset(k for k, node in graph.items() if calls(node, func))

        readers: dict[Hashable, int] = dict.fromkeys(graph, 0)
        for node in graph.values():
            for d in node.dependencies:
                readers[d] += 1
        return cls(graph, _levels(graph), calling(operator.getitem), calling(hold_block),
                   list(flatten(arr.__dask_keys__())), arr, readers)

    def run(self, workers: int | None) -> da.Array:
        """The persisted dask array: replayed where the last run noted a replay that can be the
        same run (`graph/replay.py`, `config.replay_device_graphs`), else every task evaluated
        (see the module docstring; that run notes the next replay). `workers` None or 1 runs every
        task on this thread (dask's sync scheduler)."""
        if not config.replay_device_graphs:
            return self._evaluated(workers, None)
        known = self._replay[0]
        found = None if known is None else known.run(_pool)
        if found is not None:
            return found
        with replay.noting() as notes:
            result = self._evaluated(workers, contextvars.copy_context)
        self._replay[0] = replay.Replay.of(self.graph, self.keys, self.template, notes, result)
        return result

    def _evaluated(self, workers: int | None, context: Callable[[], contextvars.Context] | None
                   ) -> da.Array:
        """Every task evaluated; a task on a pool thread runs in `context()` where given (this
        thread's context copied: the replay's notes)."""
        values: dict[Hashable, Any] = {}
        pending: dict[Hashable, Future] = {}
        readers = dict(self.readers)  # tasks still to read each value: an intermediate goes after its last
        wanted = set(self.keys)
        pool = _pool(workers) if workers and workers > 1 else None
        try:
            for key in self.order:
                node = self.graph[key]
                if isinstance(node, DataNode):
                    values[key] = node()
                    continue
                for d in node.dependencies:
                    if d in pending:
                        values[d] = pending.pop(d).result()
                given = {d: values[d] for d in node.dependencies}
                for d in node.dependencies:  # as dask releases a block once its last reader has it
                    readers[d] -= 1
                    if not readers[d] and d not in wanted:
                        del values[d]
                if pool is None or key in self.inline or (
                        key in self.holds and all(map(base.is_device_block, given.values()))):
                    values[key] = node(given)
                elif context is None:
                    pending[key] = pool.submit(node, given)
                else:
                    pending[key] = pool.submit(context().run, node, given)
            for key, future in list(pending.items()):
                values[key] = future.result()
                del pending[key]
        finally:
            for future in pending.values():  # an error: nothing of this run goes on after it
                future.cancel() or future.exception()
        t = self.template
        return da.Array({k: values[k] for k in self.keys}, t.name, t.chunks, dtype=t.dtype, meta=t._meta)
