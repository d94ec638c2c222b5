"""A device graph run again without dask's per-call machinery (issue 18, W3: host time).

`persist(device=True)` / `compute(device=True)` of one Array under the same settings lowers to the
same dask graph each time (`Array.to_dask` keeps it per runtime). Persisting it through dask
then materialises the high-level graph, converts it, orders it and starts `get_async`: ~2-5 ms
before the first task runs, with the GPU idle. `HeldRun.of(arr)` does that work once (the
materialised, converted graph, its keys and a topological order) and `run(workers)` evaluates
the same tasks with the same inputs in that order: a task whose dependencies are all data
(a `run_blocks` batch of resident blocks, each reading only source blocks) goes to a thread pool
of `workers` threads at once, every other task (the `getitem`s and `hold_block`s after them)
runs on the calling thread once its inputs are there; the first task error is raised as dask
raises it (the task's own exception), after every submitted task has finished. The result is a
dask array of the same name, keys, chunks, dtype and meta as dask's persist gives.

Only for dask's local schedulers (threads, sync) with no dask callbacks active and no other
scheduler arguments than `num_workers` (`usable`); anything else (dask.distributed, a progress
bar) keeps the dask path.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Hashable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import dask
import dask.array as da
import dask.local
import dask.threaded
from dask._task_spec import DataNode, GraphNode, convert_legacy_graph
from dask.callbacks import Callback
from dask.core import flatten

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


def _order(graph: Mapping[Hashable, GraphNode]) -> list[Hashable]:
    """The keys of `graph`, each after its dependencies (depth first, no recursion)."""
    seen: set[Hashable] = set()
    order: list[Hashable] = []
    for root in graph:
        if root in seen:
            continue
        stack = [(root, iter(graph[root].dependencies))]
        seen.add(root)
        while stack:
            key, deps = stack[-1]
            step = next((d for d in deps if d not in seen), None)
            if step is None:
                stack.pop()
                order.append(key)
                continue
            seen.add(step)
            stack.append((step, iter(graph[step].dependencies)))
    return order


@dataclass(frozen=True)
class HeldRun:
    """One device graph, materialised and ordered once; see the module docstring."""

    graph: dict[Hashable, GraphNode]
    order: list[Hashable]
    pooled: frozenset  # the tasks whose dependencies are all data: run on the pool's threads
    keys: list[Hashable]
    template: da.Array  # name, chunks, dtype and meta of the result

    @classmethod
    def of(cls, arr: da.Array) -> HeldRun:
        """`arr`'s graph prepared for `run` (nothing runs)."""
        graph = convert_legacy_graph(dict(arr.__dask_graph__()))
        pooled = frozenset(k for k, node in graph.items() if not isinstance(node, DataNode)
                           and all(isinstance(graph[d], DataNode) for d in node.dependencies))
        return cls(graph, _order(graph), pooled, list(flatten(arr.__dask_keys__())), arr)

    def run(self, workers: int | None) -> da.Array:
        """Every task evaluated (see the module docstring): the persisted dask array. `workers`
        None or 1 runs every task on this thread (dask's sync scheduler)."""
        values: dict[Hashable, Any] = {}
        pending: dict[Hashable, Future] = {}
        pool = _pool(workers) if workers and workers > 1 else None
        try:
            for key in self.order:
                node = self.graph[key]
                if isinstance(node, DataNode):
                    values[key] = node()
                    continue
                deps = node.dependencies
                if pool is not None and key in self.pooled:
                    pending[key] = pool.submit(node, {d: values[d] for d in deps})
                    continue
                for d in deps:
                    if d in pending:
                        values[d] = pending.pop(d).result()
                values[key] = node({d: values[d] for d in deps})
            for key, future in list(pending.items()):
                values[key] = future.result()
                del pending[key]
        finally:
            for future in pending.values():  # an error: nothing of this run goes on after it
                future.cancel() or future.exception()
        t = self.template
        return da.Array({k: values[k] for k in self.keys}, t.name, t.chunks, dtype=t.dtype, meta=t._meta)
