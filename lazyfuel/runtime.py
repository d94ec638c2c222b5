"""What a task of a lowered graph plans and runs under: `DefaultRuntime` (the backend choice and
the `lazyfuel.config` values captured where the graph was lowered) and the process's planner for
each backend choice (`_planner`: the default registry, the backends usable here, the judge's
measured costs)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import cache
from typing import Any

from lazyfuel.backends import catalog
from lazyfuel.judged_costs import measured_costs  # also gives new Vulkan pools the judge's kernel shapes
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
    knows the backends left out and why, and (`auto`) mentions one once where work needs it, and
    the kind of device each backend runs on (for bindings planned on some kinds only)."""
    registry, backends = default_registry(), available_backends(choice)
    kinds = {b: catalog.device_prior(b).kind for b in backends}  # Vulkan: its DeviceInfo.kind
    return Planner(registry, backends, costs=measured_costs(registry, backends),
                   left_out=left_out(choice), mention_left_out=choice == "auto", device_kinds=kinds)

