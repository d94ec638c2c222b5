"""`lazyfuel.backends.vkfft.external`: CUDA's external-memory calls checked (a failing call is a
RuntimeError naming it and its error), and a machine without cuda-python told what to install.
The import itself needs a CUDA GPU: tests/backends/vkfft/test_vkfft_cuda.py runs it where one is."""

from __future__ import annotations

import importlib.util

import pytest

from lazyfuel.backends.vkfft import external
from lazyfuel.backends.vkfft.external import ExternalBuffer, _checked


class Error(int):
    """A cuda.bindings error code (an enum in cuda-python; an int here)."""

    def __repr__(self) -> str:
        return f"<cudaError_t.{'cudaSuccess' if self == 0 else 'cudaErrorInvalidValue'}: {int(self)}>"


def test_a_call_gives_its_value_or_names_its_error():
    assert _checked("cudaGetDevice", (Error(0), 3)) == 3
    assert _checked("cudaMemGetInfo", (Error(0), 10, 20)) == (10, 20)
    with pytest.raises(RuntimeError, match=r"^cudaImportExternalMemory failed: <cudaError_t\.cudaError"):
        _checked("cudaImportExternalMemory", (Error(1), None))


@pytest.mark.skipif(importlib.util.find_spec("cuda") is not None, reason="cuda-python is installed")
def test_without_cuda_python_it_says_what_to_install():
    with pytest.raises(RuntimeError, match=r"^importing external memory into CUDA needs cuda-python \(.*\); "
                                           r"pip install cuda-python$"):
        external.device_uuid(0)
    with pytest.raises(RuntimeError, match="needs cuda-python"):
        ExternalBuffer.import_fd(-1, 4096, 0)


def test_closing_twice_is_closing_once():
    buffer = ExternalBuffer(handle=None, pointer=0, size=0, device=0, closed=True)
    buffer.close()  # already closed: no CUDA call is made
    assert buffer.closed
