"""How a Vulkan result crosses to the FFT provider (`graph.crossing`): the decision, explain's
words, the device chunk handed over, and the whole select -> rfft graph with the export path on.

The CUDA half (mapping exported memory for CuPy) needs an NVIDIA GPU with CuPy, cuda-python and
pyvkfft's CUDA back end: those tests skip here with the reason, and run in the `crossing` stage of
benchmarks/gpu_run.sh."""

from __future__ import annotations

import contextlib
import gc
import pickle

import numpy as np
import pytest
from dask.sizeof import sizeof

import lazyfuel as lf
from lazyfuel.contracts.model import Backend
from lazyfuel.graph import crossing
from lazyfuel.graph.crossing import DeviceChunk, decide
from lazyfuel.graph.explain import explain_node
from lazyfuel.graph.lower import lower
from lazyfuel.providers import available_backends, unusable_reason

V, C, CL = Backend.Vulkan, Backend.Cuda, Backend.OpenCL
GPU = bytes(range(16))
RNG = np.random.default_rng(21)


def _needs(*names: str) -> None:
    for name in names:
        try:
            available_backends(name)
        except RuntimeError as err:
            pytest.skip(str(err))


def test_one_gpu_crosses_device_to_device():
    found = decide(V, C, GPU, GPU)
    assert found.device
    assert found.describe().startswith("device to device (exported memory): Vulkan leaves the result")
    assert GPU.hex() in found.describe()


@pytest.mark.parametrize("source, target, exporter, importer, how, why", [
    (V, C, GPU, bytes(16), "auto",
     f"different GPUs: Vulkan device {GPU.hex()}, Cuda device {bytes(16).hex()}"),
    (V, C, GPU, GPU, "host", "LAZYFUEL_CROSSING=host"),
    (V, CL, GPU, GPU, "auto", "only Vulkan -> Cuda results can stay on the device"),
    (C, V, GPU, GPU, "auto", "only Vulkan -> Cuda results can stay on the device"),
    (V, C, "lavapipe cannot export memory", GPU, "auto", "lavapipe cannot export memory"),
    (V, C, GPU, "Cuda is not usable here: no CuPy", "auto", "Cuda is not usable here: no CuPy"),
])
def test_everything_else_goes_through_host_memory_and_says_why(source, target, exporter, importer, how, why):
    found = decide(source, target, exporter, importer, how)
    assert not found.device
    assert found.describe() == (f"through host memory ({why}): {source.name} hands it back as a numpy "
                                f"chunk and {target.name} takes it in")


def test_an_unknown_mode_is_refused(monkeypatch):
    monkeypatch.setenv(crossing.ENV, "sometimes")
    with pytest.raises(ValueError, match=r"CROSSING='sometimes'; expected one of auto, host, exported"):
        crossing.mode()


def test_lowering_marks_only_vulkan_results_read_by_cuda(monkeypatch):
    assert crossing.may_hand_over(V, C) and not crossing.may_hand_over(V, CL)
    assert not crossing.may_hand_over(CL, C) and not crossing.may_hand_over(None, C)
    monkeypatch.setenv(crossing.ENV, "host")
    assert not crossing.may_hand_over(V, C)
    monkeypatch.setenv(crossing.ENV, "exported")
    assert crossing.may_hand_over(V, CL)


@pytest.mark.skipif(unusable_reason(C) is None, reason="Cuda runs here: the crossing may be device")
def test_without_cuda_the_pool_crosses_through_host_and_names_the_reason():
    _needs("vulkan")
    found, importer = crossing.between(V, C)
    assert not found.device and importer is None
    assert found.why == f"Cuda is not usable here: {unusable_reason(C)}"
    assert crossing.describe(V, C) == found.describe()


@pytest.mark.parametrize("pair, why", [
    ((V, CL), "OpenCL cannot map exported device memory"),
    ((Backend.Cpu, CL), "Cpu cannot leave results in exportable device memory"),
])
def test_a_pair_whose_executor_lacks_the_capability_crosses_through_host(monkeypatch, pair, why):
    """Were a pair allowed whose source cannot export or whose target cannot map exported memory
    (`backends.base.exporter` / `importer`), the crossing goes through host and says which."""
    _needs("vulkan", "opencl")
    monkeypatch.setattr(crossing, "device_pairs", lambda: {pair})
    found, importer = crossing.between(*pair)
    assert not found.device and importer is None
    assert found.why == why


def test_host_mode_and_other_pairs_ask_no_executor(monkeypatch):
    """`host`, and a pair not in `device_pairs()`, are decided without building any executor."""
    monkeypatch.setattr(crossing, "_importers", {})
    monkeypatch.setenv(crossing.ENV, "host")
    assert crossing.between(V, C) == (decide(V, C, GPU, GPU, "host"), None)
    monkeypatch.setenv(crossing.ENV, "auto")
    assert crossing.between(V, CL)[0].why == "only Vulkan -> Cuda results can stay on the device"
    assert crossing._importers == {}


def _exported_chunk(rows: int = 64, importer=None) -> tuple[DeviceChunk, np.ndarray]:
    from vulkan_helpers import ProgramBuilder

    from lazyfuel.backends.vulkan import register
    from lazyfuel.backends.vulkan.executor import VulkanExecutor
    from lazyfuel.dtypes import DType

    register()
    x = RNG.standard_normal((50, 32)).astype(np.float32)
    idx = RNG.integers(0, 50, rows).astype(np.uint32)
    b = ProgramBuilder(x, idx)
    out = b.index_select(0, x.shape, DType.F32, 0, 1, rows)
    memory = VulkanExecutor().export(b.program((out,)), b.inputs)
    return DeviceChunk(memory, (rows, 32), np.dtype(np.float32), importer), x[idx]


@pytest.fixture
def helpers_path(monkeypatch):
    import pathlib
    import sys

    monkeypatch.syspath_prepend(str(pathlib.Path(__file__).parents[1] / "backends" / "vulkan"))
    yield
    sys.modules.pop("vulkan_helpers", None)


def test_a_device_chunk_reads_back_pickles_as_numpy_and_frees_its_memory(helpers_path):
    _needs("vulkan")
    chunk, want = _exported_chunk()
    assert (chunk.shape, chunk.dtype, chunk.ndim, chunk.strides) == (want.shape, want.dtype, 2, want.strides)
    assert sizeof(chunk) == want.nbytes
    np.testing.assert_array_equal(np.asarray(chunk), want)
    back = pickle.loads(pickle.dumps(chunk))
    assert type(back) is np.ndarray
    np.testing.assert_array_equal(back, want)
    assert not hasattr(chunk, "__cuda_array_interface__")  # no CUDA GPU named: host only
    memory = chunk.memory
    del chunk
    gc.collect()
    assert memory.freed


def _graph(chunks=(16, 48)):
    v = RNG.standard_normal((32, 48)).astype(np.float32)
    idx = RNG.integers(0, 32, size=(32, 48))
    mask = RNG.random((32, 48)) < 0.2
    y = lf.rfft(lf.masked_fill(lf.gather(lf.from_array(v, chunks=chunks), 0, idx), mask, -1.0))
    want = np.fft.rfft(np.where(mask, -1.0, np.take_along_axis(v, idx, 0).astype(np.float64)), axis=-1)
    return y, want


class _Only:
    def __init__(self, *backends: Backend) -> None:
        from lazyfuel.planner import Planner
        from lazyfuel.providers import default_registry

        self._planner = Planner(default_registry(), list(backends))

    def planner(self):
        return self._planner

    def applied(self):
        return contextlib.nullcontext()


def test_the_exported_path_through_a_graph_matches_numpy(monkeypatch):
    """`LAZYFUEL_CROSSING=exported`: the Vulkan tasks hand over device chunks even to OpenCL,
    which reads them through host memory; the result is the same."""
    _needs("vulkan", "opencl")
    monkeypatch.setenv(crossing.ENV, "exported")
    y, want = _graph()
    runtime = _Only(V, CL)
    arr = lower(y._node, runtime)
    assert any("handover" in str(k) for k in dict(arr.__dask_graph__()))
    got = arr.compute()
    err = np.max(np.abs(got - want), axis=-1) / np.max(np.abs(want), axis=-1)
    assert np.all(err < 1e-5)
    monkeypatch.setenv(crossing.ENV, "host")
    assert not any("handover" in str(k) for k in dict(lower(y._node, runtime).__dask_graph__()))


def test_a_rechunked_result_is_never_handed_over(monkeypatch):
    _needs("vulkan", "opencl")
    monkeypatch.setenv(crossing.ENV, "exported")
    y, want = _graph(chunks=(16, 16))  # the transform axis is rechunked whole on the host
    runtime = _Only(V, CL)
    arr = lower(y._node, runtime)
    assert not any("handover" in str(k) for k in dict(arr.__dask_graph__()))
    text = explain_node(y._node, runtime, runtime.planner())
    assert ("(rechunked on the host), computed on Vulkan, through host memory (it is rechunked on the "
            "host first)") in text
    np.testing.assert_allclose(arr.compute(), want, rtol=1e-4, atol=1e-3)


def test_explain_prints_the_crossing():
    _needs("vulkan", "opencl")
    y, _ = _graph()
    runtime = _Only(V, CL)
    text = explain_node(y._node, runtime, runtime.planner())
    assert ("crossing: reads fused node 1's result, computed on Vulkan, through host memory (only "
            "Vulkan -> Cuda results can stay on the device): Vulkan hands it back as a numpy chunk "
            "and OpenCL takes it in") in text


# --- on an NVIDIA GPU (the `crossing` stage of benchmarks/gpu_run.sh) -------------------------------

def _device_crossing():
    """The Cuda executor (the `MemoryImporter`) where Vulkan results cross device to device here."""
    _needs("vulkan", "cuda")
    found, importer = crossing.between(V, C)
    if not found.device:
        pytest.skip(f"the crossing goes through host memory here: {found.why}")
    return importer


def test_cupy_reads_a_device_chunk_where_it_lies_and_nothing_leaks(helpers_path):
    importer = _device_crossing()
    import cupy

    from lazyfuel.backends.vulkan.export import open_fds

    before = open_fds()
    for _ in range(3):
        chunk, want = _exported_chunk(rows=4096, importer=importer)
        with cupy.cuda.Device(importer.device.index):
            on_gpu = cupy.asarray(chunk)
            assert on_gpu.data.ptr == chunk.__cuda_array_interface__["data"][0]  # no copy
            np.testing.assert_array_equal(cupy.asnumpy(on_gpu), want)
        memory = chunk.memory
        del chunk, on_gpu
        gc.collect()
        assert memory.freed
    assert open_fds() == before


def test_select_to_rfft_on_one_gpu_crosses_device_to_device():
    _device_crossing()
    y, want = _graph()
    runtime = _Only(V, C)
    text = explain_node(y._node, runtime, runtime.planner())
    assert "computed on Vulkan, device to device (exported memory)" in text
    arr = lower(y._node, runtime)
    assert any("handover" in str(k) for k in dict(arr.__dask_graph__()))
    with lf.profile() as p:
        got = arr.compute()
    assert p.bytes_downloaded == got.nbytes  # only the FFT's result came back to the host
    err = np.max(np.abs(got - want), axis=-1) / np.max(np.abs(want), axis=-1)
    assert np.all(err < 1e-5)
