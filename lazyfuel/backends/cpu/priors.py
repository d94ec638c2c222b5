"""The Cpu backend's cost priors: numpy's kernels at a memcpy-like rate of the host, no link."""

from __future__ import annotations

from lazyfuel.registry.cost import DevicePrior, Throughput

# numpy: a few µs per call; the bandwidths of a small CPU, refined by the judge's measurements
KERNELS = Throughput(5e-6, 4e9, 2e9)


def host_prior() -> DevicePrior:
    """The Cpu backend runs in host memory: its kernels' rates and nothing crosses a link."""
    return DevicePrior("host", KERNELS)
