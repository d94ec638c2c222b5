"""`lazyfuel.commands.devices`: `lazyfuel devices`, and --device / --backend reaching the config
(through the environment, for worker processes too); a --device naming no Vulkan device here is a
UsageError listing the devices there are. Real Vulkan (lavapipe here): nothing is mocked."""

from __future__ import annotations

import argparse
import os
import re

import pytest

from lazyfuel.backends.vulkan.devices import describe_devices, list_devices
from lazyfuel.commands.devices import add_devices_command, check_device, device_name, use_device
from lazyfuel.commands.errors import UsageError
from lazyfuel.settings import config


def test_devices_prints_what_vulkan_lists_and_the_pick(parse, capsys, vulkan):
    args = parse(add_devices_command, "devices")
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert out == describe_devices() + "\n"
    first = list_devices()[0]
    assert out.startswith(f"[{first.index}] {first.name} ") and "lazyfuel uses [" in out


def test_use_device_sets_the_environment_and_the_config_reads_it_again(monkeypatch, vulkan):
    monkeypatch.delenv("LAZYFUEL_DEVICE", raising=False)
    monkeypatch.setenv("LAZYFUEL_BACKEND", "auto")
    assert config.device is None and config.backend == "auto"
    use_device(argparse.Namespace(device="0", backend_choice="cpu"))
    assert os.environ["LAZYFUEL_DEVICE"] == "0" and os.environ["LAZYFUEL_BACKEND"] == "cpu"
    assert config.device == "0" and config.backend == "cpu"


def test_use_device_without_either_option_changes_nothing(monkeypatch):
    monkeypatch.delenv("LAZYFUEL_DEVICE", raising=False)
    monkeypatch.setenv("LAZYFUEL_BACKEND", "cpu")
    use_device(argparse.Namespace())  # `lazyfuel judge` has neither
    use_device(argparse.Namespace(device=None, backend_choice=None))
    assert "LAZYFUEL_DEVICE" not in os.environ and config.backend == "cpu"


def test_a_device_named_by_index_or_name_is_accepted(vulkan):
    first = list_devices()[0]
    check_device(str(first.index))
    check_device(f"  {first.name.split()[0].lower()} ")  # a substring, any case, padded


def test_a_device_that_is_not_there_is_a_usage_error_naming_those_there_are(monkeypatch, vulkan):
    monkeypatch.delenv("LAZYFUEL_DEVICE", raising=False)
    first = list_devices()[0]
    listed = rf"devices: \[{first.index}\] {re.escape(first.name)}"
    with pytest.raises(UsageError, match=rf"^--device='no such gpu' matches no Vulkan device; {listed}"):
        use_device(argparse.Namespace(device="no such gpu", backend_choice="cpu"))
    assert "LAZYFUEL_DEVICE" not in os.environ and os.environ.get("LAZYFUEL_BACKEND") != "cpu"


def test_the_bench_title_names_the_vulkan_device_or_numpy_alone(monkeypatch, vulkan):
    first = list_devices()[0]
    assert device_name() == f"{first.name} [{first.index}, {first.kind}] (Vulkan) and the CPU (numpy)"
    monkeypatch.setenv("LAZYFUEL_BACKEND", "cpu")
    assert device_name() == "the CPU via numpy (cpu backend)"
