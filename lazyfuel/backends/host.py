"""The host CPU as device fingerprints name it (what a CPU kernel's, or a CPU driver's, speed depends on)."""

from __future__ import annotations

import os
import platform
from functools import cache


@cache
def host_cpu() -> str:
    """The host CPU: model name, logical CPU count and machine."""
    model = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model or 'unknown cpu'}; {os.cpu_count()} cpus; {platform.machine()}"
