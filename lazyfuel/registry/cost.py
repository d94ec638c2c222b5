"""Cost estimates for bindings before (or without) the judge's measurements.

A contract's cost block gives `flops` and `bytes_moved` as expressions over its op-param fields,
`dtype_bytes` and `n`. A cost function turns those into estimated seconds with a latency and a
bandwidth. `judge_measured` costs without a measurement start as the `unknown_cost` sentinel;
`fill_unset_cost_for_backend` replaces it with the shared cost function of the op kind on that
backend, which the judge later refines with measured latency and bandwidth.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
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


# Priors used until the judge measures the device: a Vulkan submit + fence costs ~100 µs (DESIGN.md
# "Facts"), numpy a few µs per call; bandwidths are those of a small CPU, refined by measurement.
SHARED_THROUGHPUT: dict[Backend, Throughput] = {
    Backend.Cpu: Throughput(5e-6, 4e9, 2e9),
    Backend.Vulkan: Throughput(100e-6, 8e9, 20e9),
    Backend.OpenCL: Throughput(200e-6, 4e9, 10e9),
    Backend.Cuda: Throughput(20e-6, 1e12, 1e13),
}


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
        return expression_cost(contract, SHARED_THROUGHPUT[contract.backend])
    return unknown_cost


def fill_unset_cost_for_backend(contract: KernelContract, cost_fn: CostFn) -> CostFn:
    """Replace the `unknown_cost` sentinel with the shared cost function of the contract's backend."""
    if cost_fn is unknown_cost:
        return expression_cost(contract, SHARED_THROUGHPUT[contract.backend])
    return cost_fn
