"""`lazyfuel.backends.vulkan.devices`: what Vulkan reports about each device (here lavapipe, read
for real), which features lazyfuel needs, which device it picks (LAZYFUEL_DEVICE by index or name,
else the best usable kind), and which devices a graph's blocks are spread over. Machines with more
devices are the real device's record with another index, name or kind."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lazyfuel.backends.vulkan.devices import PREFERENCE, _version, choose, list_devices, spread


@pytest.fixture
def real(vulkan, monkeypatch):
    monkeypatch.delenv("LAZYFUEL_DEVICE", raising=False)
    monkeypatch.delenv("LAZYFUEL_DEVICES", raising=False)
    return list_devices()[0]


def machine(real, *kinds: str, usable: tuple[bool, ...] | None = None):
    """Devices of `kinds` in this order, each the real record renamed, re-indexed (and unusable)."""
    usable = usable or (True,) * len(kinds)
    return [replace(real, index=i, name=f"{kind} gpu {i}", kind=kind, buffer_device_address=ok)
            for i, (kind, ok) in enumerate(zip(kinds, usable))]


def test_the_real_device_is_described_and_usable(real):
    assert real.usable and real.missing_features() == []
    assert real.device_local_bytes == sum(size for size, local in real.heaps if local) > 0
    lines = real.describe().splitlines()
    assert lines[0].startswith(f"[{real.index}] {real.name} ({real.kind}; driver {real.driver} ")
    assert lines[-1] == "    usable by lazyfuel"
    assert choose([real]) == real


def test_a_device_lacking_features_names_them(real):
    poor = replace(real, int8=False, storage_16bit=False)
    assert not poor.usable and poor.missing_features() == ["storageBuffer16BitAccess", "shaderInt8"]
    assert poor.describe().splitlines()[-1] == "    not usable: lacks storageBuffer16BitAccess shaderInt8"


def test_the_best_usable_kind_is_picked_then_the_lowest_index(real):
    infos = machine(real, "cpu", "integrated", "discrete", "discrete")
    assert choose(infos).index == 2
    assert choose(machine(real, "cpu", "discrete", usable=(True, False))).index == 0
    assert PREFERENCE[:4] == ("discrete", "integrated", "virtual", "cpu")


def test_a_wanted_device_is_an_index_or_a_name_substring_any_case(real):
    infos = machine(real, "cpu", "discrete")
    assert choose(infos, "0").index == 0 and choose(infos, "DISCRETE").index == 1
    with pytest.raises(RuntimeError, match=r"^--device='7' matches no Vulkan device; devices: "
                                           r"\[0\] cpu gpu 0 \(cpu\); \[1\] discrete gpu 1 \(discrete\)$"):
        choose(infos, "7", source="--device")
    lacking = machine(real, "cpu", "discrete", usable=(True, False))
    with pytest.raises(RuntimeError, match=r"^LAZYFUEL_DEVICE='1' picks discrete gpu 1, which lacks "
                                           r"bufferDeviceAddress$"):
        choose(lacking, "1")


def test_the_config_names_the_wanted_device(real, monkeypatch):
    monkeypatch.setenv("LAZYFUEL_DEVICE", "cpu gpu")
    assert choose(machine(real, "cpu", "discrete")).index == 0


def test_no_device_or_none_usable_says_so(real):
    with pytest.raises(RuntimeError, match=r"^no Vulkan device found \(on Debian: apt-get install "):
        choose([])
    with pytest.raises(RuntimeError, match=r"^no Vulkan device has the features lazyfuel needs; devices: "):
        choose(machine(real, "discrete", usable=(False,)))


def test_blocks_spread_over_every_usable_device_of_the_best_kind(real, monkeypatch):
    infos = machine(real, "discrete", "cpu", "discrete", "discrete", usable=(True, True, True, False))
    assert spread(infos) == [0, 2]  # never the CPU device beside GPUs, never an unusable one
    assert spread(infos, "2, 0,0") == [2, 0, 0]  # listed: in order, repeats kept
    assert spread(infos, "cpu") == [1]
    monkeypatch.setenv("LAZYFUEL_DEVICE", "2")
    assert spread(infos) == [2]  # the one device asked for alone
    with pytest.raises(RuntimeError, match=r"^LAZYFUEL_DEVICES item='9' matches no Vulkan device"):
        spread(infos, "0,9")


def test_versions_print_as_major_minor_patch():
    assert _version((1 << 22) | (3 << 12) | 230) == "1.3.230"
