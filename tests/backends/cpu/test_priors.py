"""The Cpu backend's cost priors (`backends.cpu.priors`): numpy's kernels in host memory, no link."""

from __future__ import annotations

from lazyfuel.backends.cpu.priors import KERNELS, host_prior
from lazyfuel.registry.cost import DevicePrior, Throughput


def test_the_host_prior_is_numpys_kernels_with_no_link_to_cross() -> None:
    prior = host_prior()
    assert prior == DevicePrior("host", Throughput(5e-6, 4e9, 2e9))
    assert prior.kernels is KERNELS and prior.link is None
    assert host_prior() == prior  # the same every call
