"""This machine's physical memory, and a byte budget given as a share of it.

Knobs such as `read_budget` and `kept_imports` take a fraction of host memory or a number of
bytes (`knob_parsers._budget`); `budget_bytes` turns either into bytes, reading the memory size
when asked (a VM's memory may grow while it runs).
"""

from __future__ import annotations

import os


def total() -> int:
    """Bytes of physical memory of this machine (0 where the system does not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, AttributeError):
        return 0


def budget_bytes(value: float | int) -> int:
    """`value` in bytes: a float is a fraction of `total()`, an int is bytes already."""
    return int(value * total()) if isinstance(value, float) else int(value)
