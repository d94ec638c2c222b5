"""The link probe a new pool runs (issue 18 item 3): what moving bytes costs on this device.

`probed_link(pool)` gives the pool's `LinkProbe`: the submit and wait of an empty batch, host to
device and device to host for a pageable numpy array and for page-locked memory
(`pinned.PinnedHost`), each as `transfer.time_round_trip` moves a program's inputs and results,
and the device's own copy rate (one `vkCmdCopyBuffer` between device buffers). Each is the best of
a few rounds of `PROBE_BYTES`, the submit taken off; the rounds stop once `BUDGET_S` (100 ms) is
spent, so on a slow device the probe is coarser, never longer. It measures what the pool's
transfer mode costs (on lavapipe's zero-copy mode an upload is an import, no copy), and is cached
per device fingerprint and transfer mode in `lazyfuel.config.cache_dir` (`link_probe.json`), so a
device is probed once, not once per process; `config.link_probe = False` (`LAZYFUEL_LINK_PROBE=0`)
skips it, and planners built while it is off price transfers by the device kind's priors. The
pool's counters (`submits`, `dispatches`) are left as they were. `priors.device_prior` turns a
probe into the link prior and caps the kernels' rate at the copy rate.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lazyfuel.registry.cost import LinkPrior
from lazyfuel.settings import config

if TYPE_CHECKING:
    from lazyfuel.backends.vulkan.pool import DevicePool

PROBE_VERSION = 1
PROBE_BYTES = 4 << 20  # per array and round: large enough that the rate dominates a submit
ROUNDS = 3
BUDGET_S = 0.1
CACHE_FILE = "link_probe.json"


@dataclass(frozen=True)
class LinkProbe:
    """One device's measured link: seconds of an empty submit, bytes per second each way for
    pageable and page-locked host memory, the device's copy rate, and how long probing took."""

    submit_s: float
    up_bytes_per_s: float
    down_bytes_per_s: float
    pinned_up_bytes_per_s: float
    pinned_down_bytes_per_s: float
    copy_bytes_per_s: float
    probe_s: float = 0.0

    @property
    def link(self) -> LinkPrior:
        """The link prior this probe measured (pageable rates; page-locked ones alongside)."""
        return LinkPrior(self.submit_s, self.up_bytes_per_s, self.down_bytes_per_s,
                         self.pinned_up_bytes_per_s, self.pinned_down_bytes_per_s, source="probed")


def _best(run: Callable[[], float], deadline: float) -> float:
    """The least seconds of up to `ROUNDS` runs of `run`, at least one, none started past `deadline`."""
    best = run()
    for _ in range(ROUNDS - 1):
        if time.perf_counter() > deadline:
            break
        best = min(best, run())
    return best


def measure(pool: DevicePool) -> LinkProbe:
    """Probe `pool`'s link now (see the module docstring)."""
    from lazyfuel.backends.vulkan.transfer import time_round_trip

    start = time.perf_counter()
    deadline = start + BUDGET_S
    submits, dispatches = pool.submits, pool.dispatches
    try:
        submit = _best(lambda: time_round_trip(pool, None, None), deadline)
        pageable = np.ones(PROBE_BYTES, np.uint8)
        pinned = pool.pinned.empty(PROBE_BYTES)
        pinned[...] = 1

        def rate(upload: np.ndarray | None, result: np.ndarray | None) -> float:
            seconds = _best(lambda: time_round_trip(pool, upload, result), deadline)
            return PROBE_BYTES / max(seconds - submit, 1e-7)

        up, down = rate(pageable, None), rate(None, pageable)
        pinned_up, pinned_down = rate(pinned, None), rate(None, pinned)
        copy = PROBE_BYTES / max(_best(lambda: _time_copy(pool), deadline) - submit, 1e-7)
    finally:
        pool.submits, pool.dispatches = submits, dispatches
    return LinkProbe(submit, up, down, pinned_up, pinned_down, copy, time.perf_counter() - start)


def _time_copy(pool: DevicePool) -> float:
    """Wall seconds of one batch copying `PROBE_BYTES` between two device buffers."""
    start = time.perf_counter()
    with pool.batch() as batch:
        src, dst = batch.alloc(PROBE_BYTES), batch.alloc(PROBE_BYTES)
        batch.fill_u32(src, 0, PROBE_BYTES)
        batch.barrier()
        batch.copy(src, 0, dst, 0, PROBE_BYTES)
        batch.run()
    return time.perf_counter() - start


def _cache_path() -> Path:
    return Path(config.cache_dir) / CACHE_FILE


def probe_key(fingerprint: str, mode: str) -> str:
    """What a probe is cached under: the probe's version, the transfer mode, the device."""
    return f"v{PROBE_VERSION} | {mode} | {fingerprint}"


def cached(key: str) -> LinkProbe | None:
    """The cached probe under `key`, or None (none, or an unreadable cache)."""
    try:
        found = json.loads(_cache_path().read_text(encoding="utf-8")).get(key)
        return LinkProbe(**found) if found else None
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def store(key: str, probe: LinkProbe) -> None:
    """Keep `probe` under `key` (written whole by rename; a cache that cannot be written is left as
    it is: the next process probes again)."""
    path = _cache_path()
    try:
        known = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError):
        known = {}
    known[key] = asdict(probe)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp",
                                         encoding="utf-8") as f:
            json.dump(known, f, indent=1, sort_keys=True)
        os.replace(f.name, path)
    except OSError:
        pass


def probed_link(pool: DevicePool) -> LinkProbe | None:
    """`pool`'s link probe: cached for its device, else measured now and cached; None where
    `config.link_probe` is off or the probe fails (the kind's priors then stand)."""
    if not config.link_probe:
        return None
    from lazyfuel.backends.vulkan.fingerprint import vulkan_fingerprint

    key = probe_key(vulkan_fingerprint(pool.info), pool.allocator.mode.value)
    found = cached(key)
    if found is None:
        try:
            found = measure(pool)
        except Exception:  # a probe must never stop a pool opening: the kind's priors stand
            return None
        store(key, found)
    return found


def describe(probe: Any) -> str:
    """One line for a reader: the probe's rates."""
    return (f"submit {probe.submit_s * 1e6:.0f} µs; up {probe.up_bytes_per_s / 1e9:.2f} GB/s "
            f"(page-locked {probe.pinned_up_bytes_per_s / 1e9:.2f}); down "
            f"{probe.down_bytes_per_s / 1e9:.2f} GB/s (page-locked "
            f"{probe.pinned_down_bytes_per_s / 1e9:.2f}); device copy "
            f"{probe.copy_bytes_per_s / 1e9:.2f} GB/s; probed in {probe.probe_s * 1e3:.1f} ms")
