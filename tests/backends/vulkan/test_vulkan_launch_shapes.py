"""Per-device kernel specialisation (launch_shapes.py): the defaults per device kind, the overrides, and
the kernels bit-exact under every workgroup choice the tables or an override may give."""

from __future__ import annotations

import numpy as np
import pytest
from test_vulkan_select import gather, index_select, masked_fill
from vulkan_helpers import random_array, raw, same_bits

import lazyfuel as lf
from lazyfuel.backends.vulkan.launch_shapes import FAMILIES, choose_tuning, default_tuning, parse_groups
from lazyfuel.dtypes import DType

pytestmark = pytest.mark.usefixtures("memory_mode")


def test_gpus_keep_vectorised_coalesced_groups_and_cpus_get_longer_sequential_runs():
    gpu, cpu = default_tuning("discrete"), default_tuning("cpu")
    assert gpu.coalesced and all(gpu.groups[f] == (64, 4) for f in FAMILIES)
    assert not cpu.coalesced and cpu.groups["index_select"] == (256, 8)
    assert all(cpu.groups[f][1] % 4 == 0 for f in FAMILIES)  # gather's quads stay possible


def test_environment_overrides_every_family_or_the_listed_ones(monkeypatch):
    monkeypatch.setenv("LAZYFUEL_VULKAN_GROUPS", "32x16")
    every = choose_tuning("cpu", 1024)
    assert set(every.groups.values()) == {(32, 16)}
    with lf.config(vulkan_groups="gather=128x8, masked_fill=64X2", vulkan_mapping="sequential"):
        some = choose_tuning("discrete", 1024)
    assert some.groups["gather"] == (128, 8) and some.groups["masked_fill"] == (64, 2)
    assert some.groups["index_select"] == (64, 4) and not some.coalesced


@pytest.mark.parametrize("text, says", [("gatherr=64x4", "unknown kernel family 'gatherr'"),
                                        ("64", "is not LOCALxELEMS"), ("2048x4", "1..1024"),
                                        ("index_select=64x0", "at least 1 element")])
def test_bad_overrides_say_what_is_wrong_and_what_is_accepted(text, says):
    with pytest.raises(ValueError, match=says):
        parse_groups(text, 1024)
    with pytest.raises(ValueError, match="MAPPING='strided'; expected one of auto, coalesced, sequential"):
        choose_tuning("cpu", 1024, mapping="strided")


@pytest.mark.parametrize("groups", [(256, 8), (64, 4), (96, 12), (1, 5)], ids=lambda g: f"{g[0]}x{g[1]}")
def test_select_kernels_are_bit_exact_under_each_group_choice(executor, pool, mapping, groups, monkeypatch):
    """Rows that straddle invocations and workgroups, odd counts, and a bad index reported."""
    for family in FAMILIES:
        monkeypatch.setitem(pool.groups, family, groups)
    rng = np.random.default_rng(groups[0] * 31 + groups[1])
    for dtype in (DType.F32, DType.U8, DType.F64):
        x = random_array(rng, dtype, (37, 13))
        idx = rng.integers(0, 37, 53).astype(np.uint32)
        same_bits(index_select(executor, x, 0, idx), raw(x)[idx].view(x.dtype))
        gidx = rng.integers(0, 13, (37, 11)).astype(np.uint32)
        same_bits(gather(executor, x, 1, gidx),
                  np.take_along_axis(raw(x), gidx.astype(np.intp), axis=1).view(x.dtype))
        mask = rng.integers(0, 2, x.shape).astype(bool)
        fill = bytes(range(dtype.itemsize))
        value = np.frombuffer(fill, f"V{dtype.itemsize}")[0]
        same_bits(masked_fill(executor, x, mask, fill), np.where(mask, value, raw(x)).view(x.dtype))
    bad = np.array([0, 5, 99, 1, 77], np.uint32)
    for inner in (13, 32):  # rows of 13 words (the general path) and of 8 16-byte words
        with pytest.raises(IndexError, match="index 99 at position 2"):
            index_select(executor, random_array(rng, DType.F32, (37, inner)), 0, bad)


@pytest.mark.parametrize("kernel", ["index_select", "index_select_general"], ids=["aligned-rows", "general"])
@pytest.mark.parametrize("dtype", [DType.F32, DType.U8, DType.F16], ids=str)
def test_index_select_rows_of_whole_invocations_match_the_general_path(executor, pool, mapping, dtype,
                                                                         kernel, monkeypatch):
    """Rows a multiple of an invocation's words take the straight row copy (sequential mapping);
    the general path (the `index_select_general` binding, asked for by name) must give the same
    bits, over several outer slices and tiles."""
    monkeypatch.setattr(pool, "max_groups", 3)  # several dispatches: tiles start mid-array
    rng = np.random.default_rng(7 + list(DType).index(dtype))
    for shape, dim, m in (((5, 9, 64), 1, 11), ((300, 128), 0, 257), ((2, 3, 512), 2, 40)):
        x = random_array(rng, dtype, shape)
        idx = rng.integers(0, shape[dim], m).astype(np.uint32)
        expected = np.take(raw(x), idx.astype(np.intp), axis=dim).view(x.dtype)
        same_bits(index_select(executor, x, dim, idx, kernel), expected)


@pytest.mark.parametrize("kernel", ["index_select_general", "gather_scalar"])
def test_a_variant_is_a_binding_the_planner_takes_when_it_is_pinned(vulkan, kernel):
    """The other code path of a kernel is asked for by name (`lf.config(pin_kernels=...)`), not by
    a switch: explain names it, it runs bit-equal, and without the pin the default path runs."""
    rng = np.random.default_rng(41)
    x = random_array(rng, DType.F32, (64, 32))
    if kernel == "gather_scalar":
        idx = rng.integers(0, 64, (64, 32))
        y, want = lf.gather(lf.from_array(x, chunks=(64, 32)), 0, idx), np.take_along_axis(raw(x), idx, 0)
    else:
        idx = rng.integers(0, 64, 40)
        y, want = lf.index_select(lf.from_array(x, chunks=(64, 32)), 0, idx), raw(x)[idx]
    with lf.config(pin_kernels=[kernel]):
        assert f"{kernel} [lazyfuel-glsl-variant]" in lf.explain(y)
        with lf.profile() as p:
            same_bits(y.compute(), want.view(x.dtype))
    assert any(kernel in name for name in p.bindings)
    with lf.profile() as p:
        same_bits(y.compute(), want.view(x.dtype))
    assert not any(kernel in name for name in p.bindings)
