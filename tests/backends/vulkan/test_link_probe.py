"""The link probe a new pool runs (issue 18 item 3), on the real device: it measures both ways,
pageable and page-locked, and the device's copy rate within 100 ms, is cached per device
fingerprint in the cache directory, prices transfers before any judge run, leaves the pool's
counters alone, and `lf.config(link_probe=False)` turns it off."""

from __future__ import annotations

import json

import pytest

import lazyfuel as lf
from lazyfuel.backends.vulkan import link_probe
from lazyfuel.backends.vulkan.fingerprint import vulkan_fingerprint
from lazyfuel.backends.vulkan.pool import DevicePool
from lazyfuel.backends.vulkan.priors import BY_KIND, kind_prior


@pytest.fixture
def new_pool(tmp_path, monkeypatch):
    """Open pools on the default device with an empty cache directory; closed after the test."""
    monkeypatch.setenv("LAZYFUEL_CACHE_DIR", str(tmp_path))
    opened: list[DevicePool] = []

    def open_pool() -> DevicePool:
        opened.append(DevicePool())
        return opened[-1]
    yield open_pool
    for p in opened:
        assert p.validation_messages == []
        p.close()


def test_a_new_pool_probes_its_link_once_per_device(new_pool, tmp_path):
    pool = new_pool()
    probe = pool.link_probe
    assert probe is not None and probe.probe_s > 0  # its time against BUDGET_S: the next test's rule
    assert min(probe.up_bytes_per_s, probe.down_bytes_per_s, probe.pinned_up_bytes_per_s,
               probe.pinned_down_bytes_per_s, probe.copy_bytes_per_s) > 0 and probe.submit_s > 0
    assert pool.submits == 0 and pool.dispatches == 0  # the probe's batches are not the pool's work
    stored = json.loads((tmp_path / link_probe.CACHE_FILE).read_text())
    key = f"v{link_probe.PROBE_VERSION} | {pool.allocator.mode.value} | {vulkan_fingerprint(pool.info)}"
    assert list(stored) == [key] == [link_probe.probe_key(vulkan_fingerprint(pool.info),
                                                          pool.allocator.mode.value)]
    assert new_pool().link_probe == probe  # the second pool reads the cache: probed once


def test_no_round_starts_past_the_budgets_deadline():
    # The budget is kept by `_best` starting no round past the deadline (at least one round a
    # measurement): asserted on the rule, not on a wall time this shared 2-CPU machine can stretch.
    runs = []
    assert link_probe._best(lambda: runs.append(1) or 2.0, deadline=0.0) == 2.0 and len(runs) == 1
    times = iter(range(link_probe.ROUNDS, 0, -1))
    assert link_probe._best(lambda: float(next(times)), deadline=float("inf")) == 1.0


def test_the_probe_prices_the_link_and_caps_the_kernels_at_the_copy_rate(new_pool):
    pool = new_pool()
    probe = pool.link_probe
    prior = kind_prior(pool.info.kind, probe)
    assert prior.link.source == "probed" and prior.link.up_bytes_per_s == probe.up_bytes_per_s
    assert prior.link.pinned_down_bytes_per_s == probe.pinned_down_bytes_per_s
    kind = BY_KIND[pool.info.kind]
    assert prior.kernels.bytes_per_s == min(kind.kernels.bytes_per_s, probe.copy_bytes_per_s)
    assert kind_prior(pool.info.kind) == kind and kind.link.source == "prior"


def test_the_probe_can_be_turned_off(new_pool, tmp_path):
    with lf.config(link_probe=False):
        pool = new_pool()
    assert pool.link_probe is None and not (tmp_path / link_probe.CACHE_FILE).exists()
    assert kind_prior(pool.info.kind, pool.link_probe).link.source == "prior"


def test_an_unreadable_cache_is_probed_again(new_pool, tmp_path):
    (tmp_path / link_probe.CACHE_FILE).write_text("not json")
    assert new_pool().link_probe is not None
    assert json.loads((tmp_path / link_probe.CACHE_FILE).read_text())
