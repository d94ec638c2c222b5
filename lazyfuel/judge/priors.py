"""Priors by device kind: what a step and a transfer cost before the judge has measured anything.

With an empty judge cache the planner still has to put work where it runs fastest (issue 18:
`auto` right on the first run). A prior is a rate per byte, so a step's cost grows with the bytes
its contract says it moves (`bytes_moved`) and a program's transfers with the bytes that cross
the link (each input's memory span in, each result out). The rates come from what kind of device
a backend runs on (Vulkan's `DeviceInfo.kind`), not from one number for every device:

- the Cpu backend: numpy's kernels, a memcpy-like rate of the host (`SHARED_THROUGHPUT[Cpu]`);
  it moves nothing over a link;
- a Vulkan `cpu` device (lavapipe): its shaders run on the same cores, several times slower than
  numpy per byte (docs/internals.md, "what lavapipe makes expensive"), and its "link" is host
  memory: imports, or a CPU copy into mapped memory;
- a `discrete` GPU: HBM-speed kernels behind a PCIe link that pageable host arrays cross at
  about 10 GB/s each way (issue 18's table: 1 - 16 GB/s by chunk size);
- an `integrated` (or `virtual`, `other`) GPU: kernels faster than the CPU's, host memory shared.

The judge's measurements replace these per binding (`MeasuredCosts.step_cost`) and per transfer
mode (`TransferJudgement`), so these need only be right in order of magnitude: which backend
wins, not by how much.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lazyfuel.contracts.model import Backend
from lazyfuel.registry.cost import SHARED_THROUGHPUT, Throughput


@dataclass(frozen=True)
class LinkPrior:
    """A device's link to host memory: one submit and wait per program, a rate each way."""

    submit_s: float
    up_bytes_per_s: float
    down_bytes_per_s: float

    def seconds(self, up: Sequence[int], down: Sequence[int]) -> float:
        """A program's transfers: one submit, inputs of `up` bytes each in, results of `down` out."""
        return self.submit_s + sum(up) / self.up_bytes_per_s + sum(down) / self.down_bytes_per_s


@dataclass(frozen=True)
class DevicePrior:
    """The prior rates of one backend on one kind of device: its kernels and (None: none) its link."""

    kind: str
    kernels: Throughput
    link: LinkPrior | None = None


_HOST_LINK = LinkPrior(100e-6, 8e9, 8e9)  # host-memory devices: imports, or a CPU copy
VULKAN_PRIORS: dict[str, DevicePrior] = {
    "cpu": DevicePrior("cpu", Throughput(200e-6, 1e9, 5e9), _HOST_LINK),
    "discrete": DevicePrior("discrete", Throughput(100e-6, 1e12, 1e14), LinkPrior(100e-6, 10e9, 10e9)),
    "integrated": DevicePrior("integrated", Throughput(100e-6, 50e9, 1e12), _HOST_LINK),
    "virtual": DevicePrior("virtual", Throughput(100e-6, 50e9, 1e12), _HOST_LINK),
    "other": DevicePrior("other", Throughput(100e-6, 50e9, 1e12), _HOST_LINK),
}
CPU_PRIOR = DevicePrior("host", SHARED_THROUGHPUT[Backend.Cpu])


def device_prior(backend: Backend, kind: str | None = None) -> DevicePrior:
    """The prior of `backend` on a device of `kind` (Vulkan's `DeviceInfo.kind`; ignored for Cpu).

    A backend or kind with no row here keeps the shared priors (`SHARED_THROUGHPUT`) and no link.
    """
    if backend is Backend.Cpu:
        return CPU_PRIOR
    if backend is Backend.Vulkan and kind in VULKAN_PRIORS:
        return VULKAN_PRIORS[kind]
    shared = SHARED_THROUGHPUT.get(backend, SHARED_THROUGHPUT[Backend.Vulkan])
    return DevicePrior(kind or "unknown", shared)
