"""Index blocks kept on a device between computes: a graph computed many times uploads its
indices once.

A select's concrete indices are a read-only snapshot taken when the op was built
(`graph.indices.Indices.concrete`), and a persisted index array's device blocks
(`persist(device=True)`) never change either. So the program input a task makes from them (the
block of the snapshot, moved to its source part's start and narrowed to the kernels' index dtype;
or a resident index block checked, moved and narrowed on the host) is the same every compute.
Where the select's source lies in a device's memory (a resident block), that input is kept there
as a device block of its own (`BlockHolder.hold`), keyed by

    (id of what it was made from, where in it, shape, the start it was moved by, the device)

and bound in place by the next compute's program: no upload, and no host work on the indices.

- What it is made from must be immutable while the entry lives: a snapshot (`mark_snapshot`,
  which `Indices.concrete` calls) or a device block. A `weakref.finalize` on it drops its
  entries when it goes, so an id seen again is never a stale hit.
- Bounded: per device at most `config.kept_indices` bytes (a fraction of host memory, bytes, or
  0 for none), least recently used entries dropped first; an entry larger than that is not kept.
  The kept blocks also count in the device's resident store, under its budget, and spill as
  other resident blocks do (a spilled one comes back when bound).
- Host sources are never kept here: a program reading a host source moves it anyway, and the
  Cpu reads the indices in place. Nor where the program may not run on the source's device: the
  task says which backends it plans over (`keeping`): kept when the graph was lowered for that
  backend alone, or for `auto` with the result staying on the device (`persist(device=True)`,
  `compute(device=True)`); an `auto` compute to host memory may pick the Cpu (lavapipe does),
  which would download the kept copy every compute.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np

from lazyfuel import host_memory
from lazyfuel.backends import base
from lazyfuel.graph.span import address, owner
from lazyfuel.settings import config

Home = tuple[Any, int]
_KEEPING: ContextVar[tuple[str, bool, float | int] | None] = ContextVar("lazyfuel_kept_indices",
                                                                       default=None)
_SNAPSHOTS: weakref.WeakValueDictionary[int, np.ndarray] = weakref.WeakValueDictionary()  # by id


def mark_snapshot(values: np.ndarray) -> None:
    """Record `values` (a read-only array owning its memory) as an index snapshot nothing changes:
    blocks of it may be kept on devices."""
    _SNAPSHOTS[id(values)] = values


def snapshot_of(values: np.ndarray) -> np.ndarray | None:
    """The snapshot `values` is a view of, or None."""
    root = owner(values)
    return root if _SNAPSHOTS.get(id(root)) is root else None


class KeptIndices:
    """Device copies of index inputs, per device, least recently used last; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple, tuple[Any, int]] = OrderedDict()
        self._bytes: dict[Home, int] = {}
        self._watched: set[int] = set()  # ids of origins with a finalizer that forgets them

    def bytes_on(self, home: Home) -> int:
        """Bytes kept for device `home`."""
        with self._lock:
            return self._bytes.get(home, 0)

    def __len__(self) -> int:
        return len(self._entries)

    def input(self, origin: object, detail: Hashable, home: Home, made: Callable[[], np.ndarray],
              beside: object = None) -> Any:
        """The program input made from `origin` (`detail` says which part and how it was moved):
        the kept device block when there is one lying beside `beside` (the select's source: the
        same pool, so an entry of a pool rebuilt since is made again), else `made()`, kept on
        `home`'s device where it fits under the task's `kept_indices` (`keeping`; the host array
        where it does not, or no holder is there)."""
        key = (id(origin), detail, home)
        with self._lock:
            found = self._entries.get(key)
            if found is not None and _beside(found[0], beside):
                self._entries.move_to_end(key)
                return found[0]
        host = made()
        keeping_now = _KEEPING.get()
        limit = host_memory.budget_bytes(keeping_now[2] if keeping_now else config.kept_indices)
        if host.nbytes == 0 or host.nbytes > limit:
            return host
        holder = base.holder(home[0], home[1])
        if isinstance(holder, str):
            return host
        block = holder.hold(host)
        with self._lock:
            if id(origin) not in self._watched:
                self._watched.add(id(origin))
                weakref.finalize(origin, self._forget, id(origin))
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes[home] -= old[1]
            self._entries[key] = (block, host.nbytes)
            self._bytes[home] = self._bytes.get(home, 0) + host.nbytes
            self._trim(home, limit)
        return block

    def _trim(self, home: Home, limit: int) -> None:
        """Drop `home`'s least recently used entries until it keeps at most `limit` bytes."""
        for key in [k for k in self._entries if k[2] == home]:
            if self._bytes[home] <= limit:
                break
            _, nbytes = self._entries.pop(key)
            self._bytes[home] -= nbytes

    def _forget(self, origin_id: int) -> None:
        """`origin` went: drop its entries (their blocks are freed when no batch holds them)."""
        with self._lock:
            self._watched.discard(origin_id)
            for key in [k for k in self._entries if k[0] == origin_id]:
                _, nbytes = self._entries.pop(key)
                self._bytes[key[2]] -= nbytes

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._entries.clear()
            self._bytes.clear()


KEPT = KeptIndices()


def _beside(block: object, source: object) -> bool:
    """Whether `block` lies in the same device pool as `source` (where both say which)."""
    mine, theirs = getattr(block, "pool", None), getattr(source, "pool", None)
    return mine is None or theirs is None or mine is theirs


@contextmanager
def keeping(choice: str, resident: bool, limit: float | int) -> Iterator[None]:
    """Inside: a task builds its inputs for a graph lowered for backend `choice` (`auto` or one
    backend's name), its result staying on the device where `resident`, under the graph's
    `kept_indices` value `limit`; outside any, nothing is kept."""
    token = _KEEPING.set((choice.lower(), resident, limit))
    try:
        yield
    finally:
        _KEEPING.reset(token)


def _wanted(home: Home) -> bool:
    """Whether the task's program runs on `home`'s backend for sure enough to keep indices there."""
    found = _KEEPING.get()
    if found is None or not found[2]:
        return False
    choice, resident, _ = found
    return choice == home[0].name.lower() or (choice == "auto" and resident)


def kept_input(values: Any, moved: Hashable, source: Any, made: Callable[[], np.ndarray]) -> Any:
    """The index input `made()` builds from `values` (a block of a snapshot, or a device block of
    indices), `moved` saying how (the start it was moved by, the dtype and axis it was checked
    against), kept on the device where `source` (the select's source) lies when `values` cannot
    change: a device block bound in place by this and later computes. `made()` as it is where the
    source is in host memory, keeping is off, or `values` may change."""
    home = base.block_home(source)
    if home is None or not _wanted(home):
        return made()
    if base.is_device_block(values):
        return KEPT.input(values, ("block", moved), home, made, source)
    if not isinstance(values, np.ndarray):
        return made()
    root = snapshot_of(values)
    if root is None:
        return made()
    detail = ("view", address(values) - address(root), values.shape, values.strides, moved)
    return KEPT.input(root, detail, home, made, source)


_HITS: weakref.WeakKeyDictionary[Any, dict[Hashable, int | None]] = weakref.WeakKeyDictionary()
_HITS_LOCK = threading.Lock()


def one_part(block: Any, parts: Hashable, hit: Callable[[], int | None]) -> int | None:
    """`hit()` (the one part of a select's source, laid out as `parts` says, that the index
    device block `block` hits, or None), found once per block and layout while `block` lives
    and keeping is on: a block's values never change, so later computes need not read them."""
    found = _KEEPING.get()
    if found is None or not found[2]:
        return hit()
    with _HITS_LOCK:
        known = _HITS.get(block, {})
        if parts in known:
            return known[parts]
    found = hit()
    with _HITS_LOCK:
        _HITS.setdefault(block, {})[parts] = found
    return found
