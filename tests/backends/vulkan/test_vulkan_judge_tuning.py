"""The judge's kernel shapes on the real device: `tune_kernels` times and stores a pick per family,
a new pool starts from the cached picks (the environment's overrides win, no picks: the defaults),
and the kernels stay bit-exact under a pick that is not the default. Decisions that need a given
outcome are made on fixed timings (a fake timing source), never on the loaded machine's clock."""

from __future__ import annotations

import numpy as np
import pytest
from test_vulkan_contiguize import contiguize
from test_vulkan_select import gather, index_select, masked_fill
from vulkan_helpers import random_array, raw, same_bits

from lazyfuel.backends.vulkan.executor import VulkanExecutor
from lazyfuel.backends.vulkan.fingerprint import vulkan_fingerprint
from lazyfuel.backends.vulkan.kernels import family_revision
from lazyfuel.backends.vulkan.launch_shapes import TUNED_FAMILIES, default_tuning, measured_picks
from lazyfuel.backends.vulkan.pool import DevicePool
from lazyfuel.contracts.model import Backend
from lazyfuel.dtypes import DType
from lazyfuel.judge import Judge, JudgeCache, TuningTarget
from lazyfuel.shape_tuning import tune_kernels

PICK = (128, 16)  # not a default of any device kind


def vulkan_picks(pool: DevicePool) -> dict[str, tuple[int, int]]:
    """The judge cache's shapes a new pool on `pool`'s device would start from."""
    return measured_picks(pool.info, pool.info.max_workgroup_size)


@pytest.fixture
def cache(tmp_path, monkeypatch) -> JudgeCache:
    """A judge cache in a fresh directory, which new pools read too ($LAZYFUEL_CACHE_DIR)."""
    monkeypatch.setenv("LAZYFUEL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("LAZYFUEL_VULKAN_GROUPS", raising=False)
    return JudgeCache()


@pytest.fixture
def new_pool():
    """Open a fresh pool of the default device (what a new process gets); closed after the test."""
    opened = []

    def open_pool() -> DevicePool:
        opened.append(DevicePool())
        return opened[-1]
    yield open_pool
    for p in opened:
        p.close()


def store_picks(executor, pool, cache, winners: dict[str, tuple[int, int]]) -> None:
    """Tune every family on fixed timings: the families in `winners` have theirs 40 % faster."""
    defaults = default_tuning(pool.info.kind).groups
    targets = []
    for family in TUNED_FAMILIES:
        best = winners.get(family)
        times = {defaults[family]: 1e-3, PICK: 0.6e-3 if best == PICK else 1.2e-3}
        targets.append(TuningTarget(family, family_revision(family), defaults[family], (PICK,),
                                    (lambda shape, t=times: t[shape],)))
    Judge(executor, vulkan_fingerprint(pool.info), cache, quick=True).tune(targets)


def test_tuning_times_every_family_on_the_kernel_clock_and_stores_what_the_pool_then_runs(
        executor, pool, cache, monkeypatch):
    monkeypatch.setattr(pool, "groups", dict(pool.groups))  # the session's pool gets its shapes back
    found = tune_kernels(cache, quick=True, backends=[Backend.Vulkan])
    assert [p.family for p, _ in found] == list(TUNED_FAMILIES) and all(m for _, m in found)
    defaults = default_tuning(pool.info.kind).groups
    for pick, _ in found:
        assert pick.default == defaults[pick.family] and pick.revision_hash == family_revision(pick.family)
        assert pick.timings[0].shape == pick.default and len(pick.timings) >= 3
        assert all(t.seconds > 0 for t in pick.timings) and pick.reason.startswith(pick.family)
        assert pool.groups[pick.family] == pick.chosen
    assert vulkan_picks(pool) == {p.family: p.chosen for p, _ in found if p.changed}
    assert all(not m for _, m in tune_kernels(cache, quick=True, backends=[Backend.Vulkan]))  # cached now


def test_a_new_pool_starts_from_the_picks_under_the_environment_overrides(executor, pool, cache, new_pool,
                                                                          monkeypatch):
    defaults = default_tuning(pool.info.kind).groups
    assert new_pool().groups == defaults  # nothing measured: the device kind's table, as before
    store_picks(executor, pool, cache, {"index_select": PICK, "masked_fill": PICK})
    assert vulkan_picks(pool) == {"index_select": PICK, "masked_fill": PICK}  # gather: a tie
    picked = new_pool()
    assert picked.groups == {**defaults, "index_select": PICK, "masked_fill": PICK}
    monkeypatch.setenv("LAZYFUEL_VULKAN_GROUPS", "index_select=64x4")
    overridden = new_pool()
    assert overridden.groups["index_select"] == (64, 4) and overridden.groups["masked_fill"] == PICK


def test_a_pick_of_an_older_shader_revision_is_not_applied(executor, pool, cache):
    store_picks(executor, pool, cache, {"gather": PICK})
    raw_file = cache.path.read_text().replace(family_revision("gather"), "0123456789abcdef")
    cache.path.write_text(raw_file)
    assert vulkan_picks(pool) == {}


def test_kernels_are_bit_exact_on_a_pool_running_the_picks(executor, pool, cache, new_pool):
    store_picks(executor, pool, cache, dict.fromkeys(TUNED_FAMILIES, PICK))
    picked = new_pool()
    assert all(picked.groups[f] == PICK for f in TUNED_FAMILIES)
    run = VulkanExecutor(pool=picked)
    rng = np.random.default_rng(40)
    for dtype in (DType.F32, DType.U8, DType.F64):
        x = random_array(rng, dtype, (301, 37))
        idx = rng.integers(0, 301, 517).astype(np.uint32)
        same_bits(index_select(run, x, 0, idx), raw(x)[idx].view(x.dtype))
        gidx = rng.integers(0, 37, (301, 23)).astype(np.uint32)
        expected = np.take_along_axis(raw(x), gidx.astype(np.intp), axis=1).view(x.dtype)
        same_bits(gather(run, x, 1, gidx), expected)
        mask = rng.integers(0, 2, x.shape).astype(bool)
        fill = bytes(range(dtype.itemsize))
        value = np.frombuffer(fill, f"V{dtype.itemsize}")[0]
        same_bits(masked_fill(run, x, mask, fill), np.where(mask, value, raw(x)).view(x.dtype))
        same_bits(contiguize(run, x.T), np.ascontiguousarray(x.T))

