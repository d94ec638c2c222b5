"""Cost estimates for bindings before (or without) the judge's measurements, and the prior records.

A contract's cost block gives `flops` and `bytes_moved` as expressions over its op-param fields,
`dtype_bytes` and `n`. A cost function turns those into estimated seconds with a latency and a
bandwidth (`Throughput`). `judge_measured` costs without a measurement start as the `unknown_cost`
sentinel; `fill_unset_cost_for_backend` replaces it with the shared cost function of the op kind on
that backend, which the judge later refines with measured latency and bandwidth.

The rates are each backend's own: its package registers them with its `BackendInfo`
(`backends.catalog`), which hands the kind-independent one (`BackendInfo.kernels`) to this layer
(`use_throughput`), so nothing here names a backend. A backend that registered none is priced by
`UNKNOWN_DEVICE` (a submit of ~100 µs and a small device's bandwidths). The records a backend's
device prior is made of (`DevicePrior`: its kernels' rates and its link to host memory,
`LinkPrior`) live here too, so a backend package and the judge layer share one definition.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lazyfuel.contracts.model import Backend, KernelContract, Provenance

CostFn = Callable[[Mapping[str, Any]], float]


@dataclass(frozen=True)
class Throughput:
    """Fixed cost per call, bytes per second and flops per second of a backend."""

    latency_s: float
    bytes_per_s: float
    flops_per_s: float


@dataclass(frozen=True)
class LinkPrior:
    """A device's link to host memory: one submit and wait per program, a rate each way (pageable
    host memory; `pinned_*`: page-locked memory, where known)."""

    submit_s: float
    up_bytes_per_s: float
    down_bytes_per_s: float
    pinned_up_bytes_per_s: float | None = None
    pinned_down_bytes_per_s: float | None = None
    source: str = "prior"  # "prior" (from the device's kind) or "probed" (measured at pool creation)
    # pinning pageable host memory for the device to read it in place (an import), where known
    import_bytes_per_s: float | None = None
    # a kernel reading rows of host memory in place pays at least this per row (random rows: a
    # page translation and a read request each; 0: only the rate counts)
    read_row_s: float = 0.0

    def seconds(self, up: Sequence[int], down: Sequence[int]) -> float:
        """A program's transfers: one submit, inputs of `up` bytes each in, results of `down` out."""
        return self.submit_s + sum(up) / self.up_bytes_per_s + sum(down) / self.down_bytes_per_s


@dataclass(frozen=True)
class DevicePrior:
    """The prior rates of one backend on one kind of device: its kernels and (None: none, the host
    itself) its link to host memory."""

    kind: str
    kernels: Throughput
    link: LinkPrior | None = None


# A device nobody described: a Vulkan-like submit + fence of ~100 µs and the
# bandwidths of a small device.
UNKNOWN_DEVICE = Throughput(100e-6, 8e9, 20e9)

_lock = threading.Lock()
_throughputs: dict[Backend, Throughput] = {}
_host: list[Backend] = []  # the backends that run in host memory, in registration order


def use_throughput(backend: Backend, through: Throughput, host: bool = False) -> None:
    """Price `backend`'s bindings (their declared and unmeasured costs) with `through` from now on,
    and (`host`) know it runs in host memory: what `backends.catalog.register` does with each
    backend's `BackendInfo.kernels` and `.in_host_memory`."""
    with _lock:
        _throughputs[backend] = through
        if host and backend not in _host:
            _host.append(backend)


def host_backend() -> Backend | None:
    """The backend whose kernels run in host memory (whose copy is what a host copy costs), or None."""
    with _lock:
        return _host[0] if _host else None


def throughput(backend: Backend) -> Throughput:
    """The kind-independent rates `backend` registered (`UNKNOWN_DEVICE` where it registered none)."""
    with _lock:
        return _throughputs.get(backend, UNKNOWN_DEVICE)


def unknown_cost(env: Mapping[str, Any]) -> float:
    """The sentinel for a judge_measured cost with no measurement; never used to plan."""
    raise RuntimeError("unknown_cost was not replaced: call fill_unset_cost_for_backend")


def expression_cost(contract: KernelContract, through: Throughput) -> CostFn:
    """Seconds for one call: latency + bytes_moved / bandwidth + flops / flop rate."""
    bytes_moved, flops = contract.cost.bytes_moved, contract.cost.flops

    def cost(env: Mapping[str, Any]) -> float:
        return (through.latency_s + bytes_moved.evaluate(env) / through.bytes_per_s
                + flops.evaluate(env) / through.flops_per_s)

    return cost


def initial_cost(contract: KernelContract) -> CostFn:
    """A declared cost is trusted as written; a judge_measured one starts as `unknown_cost`."""
    if contract.cost.provenance is Provenance.declared:
        return expression_cost(contract, throughput(contract.backend))
    return unknown_cost


def fill_unset_cost_for_backend(contract: KernelContract, cost_fn: CostFn) -> CostFn:
    """Replace the `unknown_cost` sentinel with the shared cost function of the contract's backend."""
    if cost_fn is unknown_cost:
        return expression_cost(contract, throughput(contract.backend))
    return cost_fn
