"""What a Vulkan step and transfer cost before the judge has measured anything, by device kind.

With an empty judge cache the planner still has to put work where it runs fastest (issue 18:
`auto` right on the first run). A prior is a rate per byte, so a step's cost grows with the bytes
its contract says it moves (`bytes_moved`) and a program's transfers with the bytes that cross
the link. The rates come from what kind of device the pool opened (`DeviceInfo.kind`):

- a `cpu` device (lavapipe): its shaders run on the same cores, several times slower than numpy
  per byte (docs/internals.md, "what lavapipe makes expensive"), and its "link" is host memory:
  imports, or a CPU copy into mapped memory;
- a `discrete` GPU: HBM-speed kernels behind a PCIe link that pageable host arrays cross at about
  10 GB/s each way (issue 18's table: 1 - 16 GB/s by chunk size);
- an `integrated` (or `virtual`, `other`) GPU: kernels faster than the CPU's, host memory shared.

Where the pool's link probe measured the link (`link_probe`, cached per device fingerprint), its
rates replace the kind's link row. The judge's measurements replace all of these per binding and
per transfer mode, so these need only be right in order of magnitude: which backend wins, not by
how much.
"""

from __future__ import annotations

from dataclasses import replace

from lazyfuel.backends.vulkan.link_probe import LinkProbe
from lazyfuel.registry.cost import DevicePrior, LinkPrior, Throughput
from lazyfuel.settings import config

# before any device is known: a submit + fence costs ~100 µs
KERNELS = Throughput(100e-6, 8e9, 20e9)

# host-memory devices: imports (nothing is pinned: ~free), or a CPU copy
_HOST_LINK = LinkPrior(100e-6, 8e9, 8e9, import_bytes_per_s=100e9)
# a discrete GPU: pinning pageable pages for an import ~23 GB/s on the H200 (decision 79); a
# kernel reading random rows in place over its link ~28 ns a row from 4 B to 1 KiB rows
# (benchmarks/probes/w2_in_place.py: 40M rows/s at 4 B, 31 GB/s at 1 KiB, 45 GB/s at 4 KiB)
_PCIE_LINK = LinkPrior(100e-6, 10e9, 10e9, import_bytes_per_s=23e9, read_row_s=28e-9)
# Device-to-device copies of at least this many bytes go through the copy shader, not
# vkCmdCopyBuffer, by device kind (`copy_kernels.copy_bytes`): the H200's copy engine moves
# ~0.85 TB/s where the copy shader (`ContiguizeKernel`) moves ~4.17 TB/s (BENCHMARKS.md, "W2 on
# the GPU again"); lavapipe's vkCmdCopyBuffer is a memcpy no shader beats, so none there.
SHADER_COPY_MIN: dict[str, int] = {"discrete": 1 << 20}

BY_KIND: dict[str, DevicePrior] = {
    "cpu": DevicePrior("cpu", Throughput(200e-6, 1e9, 5e9), _HOST_LINK),
    "discrete": DevicePrior("discrete", Throughput(100e-6, 1e12, 1e14), _PCIE_LINK),
    "integrated": DevicePrior("integrated", Throughput(100e-6, 50e9, 1e12), _HOST_LINK),
    "virtual": DevicePrior("virtual", Throughput(100e-6, 50e9, 1e12), _HOST_LINK),
    "other": DevicePrior("other", Throughput(100e-6, 50e9, 1e12), _HOST_LINK),
}


def kind_prior(kind: str, probe: LinkProbe | None = None) -> DevicePrior:
    """The prior of a Vulkan device of `kind`; with a link `probe`, its link in place of the kind's
    and the kernels' rate no faster than the device's copy (a kernel moves its bytes no faster)."""
    found = BY_KIND.get(kind, DevicePrior(kind, KERNELS, _HOST_LINK))
    if probe is None:
        return found
    kernels = replace(found.kernels, bytes_per_s=min(found.kernels.bytes_per_s, probe.copy_bytes_per_s))
    kind = found.link or _HOST_LINK  # what the probe does not time: imports and row reads
    link = replace(probe.link, import_bytes_per_s=kind.import_bytes_per_s, read_row_s=kind.read_row_s)
    return DevicePrior(found.kind, kernels, link)


def shader_copy_min(kind: str) -> int | None:
    """The bytes from which a device copy on a device of `kind` is faster by the copy shader than
    by vkCmdCopyBuffer; None where it never is."""
    return SHADER_COPY_MIN.get(kind)


def device_prior() -> DevicePrior:
    """The prior of the default pool's device (opens it): its kind's rates, its probed link (the
    kind's where `config.link_probe` is off now)."""
    from lazyfuel.backends.vulkan import get_pool

    pool = get_pool()
    return kind_prior(pool.info.kind, pool.link_probe if config.link_probe else None)
