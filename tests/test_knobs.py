"""The knob table (`knobs`): the transfer modes a knob accepts are the Vulkan backend's own."""

from __future__ import annotations

import pytest

from lazyfuel.settings import TRANSFER_MODES


def test_the_transfer_modes_are_the_vulkan_backends():
    memtypes = pytest.importorskip("lazyfuel.backends.vulkan.memtypes")
    assert TRANSFER_MODES == ("auto", *(m.value for m in memtypes.Mode))
