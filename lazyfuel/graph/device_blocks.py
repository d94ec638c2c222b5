"""Which device a task's block runs on and device blocks put together: `device_for` (round-robin by
block number), `home_device` (where most of its resident inputs' bytes lie), `block_holder` (the
backend that keeps a block in device memory), `DevicePiece` and `joined` (parts concatenated on a
device where any lies on one, else on the host).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lazyfuel.backends import base, catalog
from lazyfuel.backends.base import devices
from lazyfuel.contracts.model import Backend


@dataclass(frozen=True, eq=False)
class DevicePiece:
    """Rows `lo:hi` along `axis` of a device block a read task left on its device (`read_pieces`):
    a device block itself (`base.is_device_block`: it lies where `block` lies), which `joined`
    puts together with its neighbours on the device; `np.asarray` is a host copy of the rows."""

    block: Any
    axis: int
    lo: int
    hi: int

    __lazyfuel_device_block__ = True

    @property
    def shape(self) -> tuple[int, ...]:
        shape = list(self.block.shape)
        shape[self.axis] = self.hi - self.lo
        return tuple(shape)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.block.dtype)

    @property
    def home(self) -> Any:
        return base.block_home(self.block)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        rows = (slice(None),) * self.axis + (slice(self.lo, self.hi),)
        out = np.asarray(self.block)[rows]
        return out if dtype is None else out.astype(dtype, copy=False)


def joined(parts: Sequence[Any], axis: int) -> Any:
    """`parts` concatenated along `axis`: one part as it is (a whole device block's piece: the
    block); where any part is a device block, into one device block on the device holding most of
    their bytes (`home_device`, `BlockHolder.concatenate`: device copies, device to device between
    pools where a path exists); else, or where that cannot be, on the host."""
    spans = [(p.block, p.lo, p.hi) if isinstance(p, DevicePiece) else (p, 0, p.shape[axis]) for p in parts]
    if len(parts) == 1:
        block, lo, hi = spans[0]
        if not isinstance(parts[0], DevicePiece) or (lo == 0 and hi == block.shape[axis]):
            return block
    homes = [h for h in map(base.block_home, parts) if h is not None]
    if homes:
        holder = base.holder(homes[0][0], home_device(parts, homes[0][0]))
        found = None if isinstance(holder, str) else holder.concatenate(spans, axis)
        if found is not None:
            return found
    if len(parts) == 1:
        return np.asarray(parts[0])
    return np.concatenate([np.asarray(p) for p in parts], axis=axis)


def device_for(block: int, backend: Backend) -> int | None:
    """The device number block `block` runs on: `block` modulo the number of devices `backend`
    spreads over; None for a backend with one device."""
    count = len(devices(backend))
    return block % count if count else None


def home_device(inputs: Sequence[Any], backend: Backend) -> int | None:
    """The number of the device (of `backend`'s) holding most bytes of the device blocks among
    `inputs` (the lowest number on a tie); None where none lies on one of `backend`'s devices."""
    held: dict[int, int] = {}
    for value in inputs:
        home = base.block_home(value)
        if home is not None and home[0] is backend:
            held[home[1]] = held.get(home[1], 0) + math.prod(value.shape) * value.dtype.itemsize
    return min(held, key=lambda d: (-held[d], d)) if held else None


def block_holder(number: int, home: tuple[Backend, int] | None = None) -> tuple[Backend, base.BlockHolder]:
    """The backend (and its executor) that keeps block `number` in device memory: the first by
    rank whose executor keeps blocks, on device `home` where that is the backend's (a block's
    `base.block_home`), else on block `number`'s device. RuntimeError naming why where none can
    here."""
    why = []
    for found in catalog.registered():
        backend = found.backend
        device = home[1] if home is not None and home[0] is backend else device_for(number, backend)
        holder = base.holder(backend, device)
        if not isinstance(holder, str):
            return backend, holder
        why.append(holder)
    raise RuntimeError(f"persist(device=True) keeps blocks in device memory, and no backend can "
                       f"here: {'; '.join(why)}; persist() keeps them in host memory")
