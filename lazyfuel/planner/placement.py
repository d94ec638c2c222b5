"""Where a program's data is: its inputs' memory and where its result is wanted, and so the bytes
each program moves over each link (issue 18 item 3: transfers are priced steps).

A `Placement` says, per program input, whether it is in host memory (None) or resident in the
device memory of a backend (a block kept by `persist(device=True)`), and whether the result is
wanted in host memory (None) or kept in a backend's device memory (`persist(device=True)`,
`compute(device=True)`). `link_bytes(program, placement)` gives, per device link (a backend that
does not run in host memory, `registry.cost.host_backend`), the bytes of each array that go up
(host to device) and down (device to host):

- an input already where the program runs moves nothing (a resident block read on its device);
- an input elsewhere comes down from its device (if it is on one) and up to the program's device
  (if the program runs on one): a resident block read by a host program pays a download;
- the result goes down from the program's device unless it is wanted there, and up to the device
  it is wanted on if that is another (a host program's result kept on a device pays an upload).

The program's own device is always listed (with no bytes where nothing moves): running there costs
one submit. A host program reading and writing host memory lists nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lazyfuel.contracts.model import Backend
from lazyfuel.registry.cost import host_backend

Moves = dict[Backend, tuple[list[int], list[int]]]  # device link -> (bytes up per array, down per array)


@dataclass(frozen=True)
class Placement:
    """Per program input, the backend whose device memory holds it (None: host memory), and the
    backend whose device memory the result is wanted in (None: host memory)."""

    inputs: tuple[Backend | None, ...] = ()
    result: Backend | None = None

    @classmethod
    def of(cls, where: Sequence[Backend | None], result: Backend | None = None) -> Placement:
        """A placement of inputs `where` (normalised: host-memory backends count as the host)."""
        return cls(tuple(_device(b) for b in where), _device(result))

    @property
    def all_host(self) -> bool:
        """Whether every input and the result are in host memory, as no placement at all says."""
        return self.result is None and not any(self.inputs)

    def input(self, number: int) -> Backend | None:
        """Where input `number` is (None: host memory, also for an input this placement omits)."""
        return self.inputs[number] if number < len(self.inputs) else None


def _device(backend: Backend | None) -> Backend | None:
    """`backend` where it runs on a device of its own, None where it runs in host memory."""
    return None if backend is None or backend is host_backend() else backend


def link_bytes(backend: Backend | None, up: Sequence[int], down: Sequence[int],
               placement: Placement | None = None) -> Moves:
    """The bytes a program on `backend` with inputs of `up` bytes (each one's memory span) and
    results of `down` bytes moves over each device link, given `placement` (None: all in host
    memory); see the module docstring."""
    placement = placement or Placement()
    here = _device(backend)
    moves: Moves = {here: ([], [])} if here is not None else {}

    def move(size: int, source: Backend | None, target: Backend | None) -> None:
        if source == target:
            return
        if source is not None:
            moves.setdefault(source, ([], []))[1].append(size)
        if target is not None:
            moves.setdefault(target, ([], []))[0].append(size)

    for number, size in enumerate(up):
        move(size, placement.input(number), here)
    for size in down:
        move(size, here, placement.result)
    return moves
