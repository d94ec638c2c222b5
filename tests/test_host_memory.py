"""`lazyfuel.host_memory`: this machine's memory, and budgets given as a share of it or in bytes."""

from __future__ import annotations

import os

from lazyfuel import host_memory


def test_total_is_the_physical_memory_the_system_reports():
    assert host_memory.total() == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") > 0


def test_a_fraction_is_a_share_of_host_memory_and_an_int_is_bytes():
    assert host_memory.budget_bytes(0.25) == int(0.25 * host_memory.total())
    assert host_memory.budget_bytes(1 << 30) == 1 << 30
    assert host_memory.budget_bytes(0) == 0


def test_where_the_system_does_not_say_the_total_is_zero(monkeypatch):
    def unknown(name):
        raise ValueError(name)

    monkeypatch.setattr(os, "sysconf", unknown)
    assert host_memory.total() == 0 and host_memory.budget_bytes(0.5) == 0
