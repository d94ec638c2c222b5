"""`lazyfuel.backends.host.host_cpu`: the host CPU as device fingerprints name it: the model from
/proc/cpuinfo, the logical CPU count and the machine, asked once per process."""

from __future__ import annotations

import os
import platform
from pathlib import Path

from lazyfuel.backends.host import host_cpu


def test_the_host_is_its_model_cpu_count_and_machine():
    info = Path("/proc/cpuinfo")
    model = next((line.split(":", 1)[1].strip() for line in info.read_text().splitlines()
                  if line.startswith("model name")), "") if info.exists() else ""
    model = model or platform.processor() or "unknown cpu"
    assert host_cpu() == f"{model}; {os.cpu_count()} cpus; {platform.machine()}"


def test_it_is_asked_once():
    assert host_cpu() is host_cpu() and host_cpu.cache_info().hits >= 1
