"""`lazyfuel.registry.cost`: a contract's cost expressions priced with a backend's latency and
rates, declared costs trusted as written, and a judge_measured cost left as the `unknown_cost`
sentinel until the backend's prior replaces it. Real contracts of the shipped documents."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

import lazyfuel
from lazyfuel.contracts import parse_contracts
from lazyfuel.contracts.model import Backend, Provenance
from lazyfuel.registry.cost import (
    Throughput,
    expression_cost,
    fill_unset_cost_for_backend,
    initial_cost,
    throughput,
    unknown_cost,
)

CONTRACTS = Path(lazyfuel.__file__).parent / "contracts"


def contract(document: str, kernel: str):
    return next(c for c in parse_contracts(CONTRACTS / document) if c.kernel == kernel)


def test_a_cost_is_latency_plus_bytes_over_bandwidth_plus_flops_over_rate():
    gather = contract("cpu.md", "gather")  # bytes_moved: 2 * n * dtype_bytes + 4 * n, flops 0
    cost = expression_cost(gather, Throughput(latency_s=1e-3, bytes_per_s=1e6, flops_per_s=1e9))
    assert cost({"n": 1000, "dtype_bytes": 4}) == 1e-3 + 12_000 / 1e6
    fft = contract("vkfft.md", next(c.kernel for c in parse_contracts(CONTRACTS / "vkfft.md")))
    env = {name: 8 for name in fft.cost.flops.names | fft.cost.bytes_moved.names}
    through = Throughput(0.0, 1e9, 1e6)
    want = fft.cost.bytes_moved.evaluate(env) / 1e9 + fft.cost.flops.evaluate(env) / 1e6
    assert fft.cost.flops.evaluate(env) > 0
    assert expression_cost(fft, through)(env) == pytest.approx(want, rel=0)


def test_a_declared_cost_is_priced_with_its_backends_prior_and_a_measured_one_waits():
    gather = contract("vulkan.md", "gather")
    assert gather.cost.provenance is Provenance.judge_measured
    assert initial_cost(gather) is unknown_cost
    declared = replace(gather, cost=replace(gather.cost, provenance=Provenance.declared))
    prior = throughput(Backend.Vulkan)
    env = {"n": 2**20, "dtype_bytes": 2}
    assert initial_cost(declared)(env) == prior.latency_s + (2 * 2**20 * 2 + 4 * 2**20) / prior.bytes_per_s


def test_the_sentinel_is_replaced_by_the_prior_and_a_real_cost_is_kept():
    gather = contract("cpu.md", "gather")
    filled = fill_unset_cost_for_backend(gather, unknown_cost)
    prior = throughput(Backend.Cpu)
    assert filled({"n": 10, "dtype_bytes": 8}) == prior.latency_s + 200 / prior.bytes_per_s

    def mine(env):
        return 1.0

    assert fill_unset_cost_for_backend(gather, mine) is mine


def test_the_sentinel_refuses_to_be_used_to_plan():
    with pytest.raises(RuntimeError, match=r"^unknown_cost was not replaced: call fill_unset_cost_for_"):
        unknown_cost({"n": 1})


def test_every_registered_backend_prices_with_its_own_finite_positive_prior():
    from lazyfuel.backends import catalog

    catalog.discover()
    registered = [info for info in catalog.registered() if info.kernels is not None]
    assert {info.backend for info in registered} >= {Backend.Cpu, Backend.Vulkan}
    for info in registered:
        t = throughput(info.backend)
        assert t == info.kernels
        assert all(0 < v < math.inf for v in (t.latency_s, t.bytes_per_s, t.flops_per_s))
