"""Knob values checked and normalised (`knob_parsers`): choices, counts, flags and budgets in any accepted
spelling come out one way; a bad value names the variable or knob, the value and what is accepted."""

from __future__ import annotations

import pytest

import lazyfuel as lf
from lazyfuel.settings import KNOBS


@pytest.mark.parametrize("variable, value, says", [
    ("LAZYFUEL_BACKEND", "metal", "LAZYFUEL_BACKEND='metal'; expected one of auto, vulkan, cuda, opencl"),
    ("LAZYFUEL_VULKAN_QUEUES", "two", "LAZYFUEL_VULKAN_QUEUES='two'; expected a number of queues"),
    ("LAZYFUEL_VULKAN_QUEUES", "0", "LAZYFUEL_VULKAN_QUEUES='0'; expected a number of queues"),
    ("LAZYFUEL_COPY_THREADS", "-2", "LAZYFUEL_COPY_THREADS='-2'; expected a number of threads"),
    ("LAZYFUEL_VALIDATION", "maybe", "LAZYFUEL_VALIDATION='maybe'; expected one of 0, 1, sync"),
    ("LAZYFUEL_VULKAN_TRANSFER", "copy", "LAZYFUEL_VULKAN_TRANSFER='copy'; expected one of auto, direct"),
    ("LAZYFUEL_VULKAN_MEMORY", "ssbo", "LAZYFUEL_VULKAN_MEMORY='ssbo'; expected one of auto, address"),
    ("LAZYFUEL_READ_BUDGET", "lots", "LAZYFUEL_READ_BUDGET='lots'; expected a fraction in \\(0, 1\\]"),
])
def test_a_bad_environment_value_names_the_variable_the_value_and_the_choices(monkeypatch, variable,
                                                                              value, says):
    monkeypatch.setenv(variable, value)
    name = next(k.name for k in KNOBS.values() if k.env == variable)
    with pytest.raises(ValueError, match=says):
        getattr(lf.config, name)


def test_values_are_normalised():
    with lf.config(backend="CPU", vulkan_transfer="Zero_Copy", validation="on", devices=[0, "h200"],
                   device=" ", vulkan_mapping=""):
        assert lf.config.backend == "cpu" and lf.config.vulkan_transfer == "zero-copy"
        assert lf.config.validation is True and lf.config.devices == "0,h200"
        assert lf.config.device is None and lf.config.vulkan_mapping == "auto"
    with lf.config(validation="SYNC"):
        assert lf.config.validation == "sync"


@pytest.mark.parametrize("text, value", [("0.5", 0.5), ("1.0", 1.0), ("8GiB", 8 << 30),
                                         ("512 MiB", 512 << 20), ("1000000", 1_000_000), ("2g", 2 << 30),
                                         (0.25, 0.25), (4096, 4096)])
def test_budgets_are_fractions_or_bytes(text, value):
    with lf.config(device_memory_budget=text, read_budget=text):
        assert lf.config.device_memory_budget == value == lf.config.read_budget


@pytest.mark.parametrize("text", ["0", "1.5", "-1", "0.0", "lots", "8 GB of it", True])
def test_bad_budgets_say_what_is_accepted(text):
    with pytest.raises(ValueError, match=r"device_memory_budget=.*; expected a fraction in \(0, 1\] \(0\.8\) "
                                         r"or a size in bytes"):
        lf.config(device_memory_budget=text)
