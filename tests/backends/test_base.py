"""`backends.base`'s optional executor capabilities: `exporter` and `importer` give a backend's
executor where it can export or map device memory, else the reason (no device needed beyond
building the executors; the Vulkan exporter itself is tested in vulkan/test_vulkan_export.py)."""

from __future__ import annotations

import pytest

from lazyfuel.backends import base
from lazyfuel.contracts.model import Backend
from lazyfuel.providers import register_builtin_providers, unusable_reason


@pytest.fixture(autouse=True, scope="module")
def _registered():
    register_builtin_providers()


def test_an_executor_without_the_capability_is_named_with_it():
    assert not isinstance(base.executor(Backend.Cpu), (base.MemoryExporter, base.MemoryImporter))
    assert base.exporter(Backend.Cpu) == "Cpu cannot leave results in exportable device memory"
    assert base.importer(Backend.Cpu) == "Cpu cannot map exported device memory"


def test_a_backend_that_cannot_run_here_gives_the_error_building_it():
    reason = unusable_reason(Backend.Cuda)
    if reason is None:
        pytest.skip("Cuda runs here")
    assert base.importer(Backend.Cuda) == f"Cuda is not usable here: {reason}"
    assert base.exporter(Backend.Cuda) == f"Cuda is not usable here: {reason}"


def test_the_cuda_executor_declares_the_importer_capability():
    """Checked on the class, so it holds on a machine without CUDA too."""
    from lazyfuel.backends.vkfft.cuda import CudaExecutor
    from lazyfuel.backends.vkfft.opencl import OpenCLExecutor

    assert issubclass(CudaExecutor, base.MemoryImporter)
    assert not issubclass(OpenCLExecutor, base.MemoryImporter)
    assert not issubclass(CudaExecutor, base.MemoryExporter)
