"""`lazyfuel.config` (settings.py): the environment read once and in one place, blocks that are
per thread and nest, values checked with errors that say what is accepted, and the values a graph
was lowered under reaching its tasks on threads, processes and dask.distributed workers."""

from __future__ import annotations

import os
import re
import sys
import threading
from pathlib import Path

import cloudpickle
import dask
import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel import settings
from lazyfuel.api import DefaultRuntime
from lazyfuel.settings import KNOBS

REPO = Path(__file__).resolve().parents[1]
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the task functions below, to workers


def test_the_environment_is_read_in_one_place_only():
    """Every other module asks `lazyfuel.config`; writes (the CLI's --device, a pinned worker) are
    allowed, reads are not."""
    read = re.compile(r"os\.environ(?!\[[^\]]+\]\s*=[^=])|os\.getenv|os\.getenvb")
    found = [f"{path.relative_to(REPO)}:{n}: {line.strip()}"
             for path in sorted((REPO / "lazyfuel").rglob("*.py")) if path.name != "settings.py"
             for n, line in enumerate(path.read_text().splitlines(), 1) if read.search(line)]
    assert found == []


def test_blocks_nest_and_restore_even_on_errors():
    base = lf.config.crossing
    with lf.config(crossing="host", vulkan_queues=2) as cfg:
        assert cfg is lf.config
        assert (lf.config.crossing, lf.config.vulkan_queues) == ("host", 2)
        with lf.config(vulkan_queues="3"):
            assert (lf.config.crossing, lf.config.vulkan_queues) == ("host", 3)  # adds to the outer
            assert lf.config.overrides() == (("crossing", "host"), ("vulkan_queues", 3))
        assert lf.config.vulkan_queues == 2
        with pytest.raises(KeyError), lf.config(crossing="exported"):
            raise KeyError
        assert lf.config.crossing == "host"
    assert lf.config.crossing == base and lf.config.overrides() == ()


def test_blocks_are_per_thread():
    """Two threads in their own blocks, interleaved, and a third without one, see their own."""
    barrier, seen = threading.Barrier(3), {}

    def worker(name, mode):
        if mode is None:
            barrier.wait()
            barrier.wait()
            seen[name] = lf.config.crossing
            return
        with lf.config(crossing=mode):
            barrier.wait()  # all three inside, or about to read
            barrier.wait()
            seen[name] = lf.config.crossing
    threads = [threading.Thread(target=worker, args=args)
               for args in (("a", "host"), ("b", "exported"), ("c", None))]
    with lf.config(crossing="host"):  # the main thread's block is its own too
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert seen == {"a": "host", "b": "exported", "c": lf.config.crossing}


def test_a_graph_captures_the_blocks_not_the_environment():
    x = lf.from_array(np.arange(12.0).reshape(3, 4), chunks=2).index_select(0, [2, 0])
    plain = x.to_dask()
    with lf.config(crossing="host", _force_wide=True):
        captured = x.to_dask()
    assert plain.name != captured.name  # a different config is a different graph
    runtimes = {v for task in dict(captured.__dask_graph__()).values() if isinstance(task, tuple)
                for v in task if isinstance(v, DefaultRuntime)}
    assert runtimes == {DefaultRuntime(lf.config.backend, (("_force_wide", True), ("crossing", "host")))}


def _config_in_task(runtime: DefaultRuntime) -> tuple[str, bool, int]:
    """What a task sees: the runtime's block applied over the worker's own config."""
    with runtime.applied():
        return lf.config.crossing, lf.config._force_wide, os.getpid()


@pytest.mark.parametrize("scheduler", ["threads", "processes"])
def test_captured_values_reach_tasks_on_threads_and_processes(scheduler):
    with lf.config(crossing="host", _force_wide=True):
        runtime = DefaultRuntime.current()
    crossing, wide, pid = dask.delayed(_config_in_task)(runtime).compute(scheduler=scheduler, num_workers=1)
    assert (crossing, wide) == ("host", True)
    assert (pid != os.getpid()) == (scheduler == "processes")


def test_captured_values_reach_a_distributed_worker():
    distributed = pytest.importorskip("distributed")
    with lf.config(crossing="exported"):
        runtime = DefaultRuntime.current()
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        crossing, wide, pid = client.submit(_config_in_task, runtime).result()
    assert (crossing, wide) == ("exported", False) and pid != os.getpid()


def test_a_graph_lowered_in_a_block_runs_under_it_wherever_it_is_computed(vulkan):
    """End to end: the select + fill kernel runs (one dispatch per block fewer) when the block
    that asks for it was open where the graph was lowered, also when dask computes it later,
    outside the block, on its worker threads."""
    rng = np.random.default_rng(23)
    a = rng.standard_normal((48, 16)).astype(np.float32)
    idx, mask = rng.integers(0, 48, 40), rng.random((40, 1)) < 0.5
    y = lf.masked_fill(lf.index_select(lf.from_array(a, chunks=(16, 16)), 0, idx), mask, -2.0)
    want = np.where(mask, np.float32(-2), a[idx]).tobytes()
    lowered = {}
    for fuse in (False, True):
        with lf.config(pin_kernels=["select_fill_broadcast"] if fuse else []):  # the (40, 1) mask in place
            lowered[fuse] = y.to_dask()
    counts = []
    for fuse in (False, True):
        with lf.profile() as p:
            assert lowered[fuse].compute(scheduler="threads", num_workers=2).tobytes() == want
        counts.append(p.dispatches)
    assert counts[0] - counts[1] == len(y.chunks[0])


def test_compute_takes_knobs_per_call(vulkan):
    rng = np.random.default_rng(29)
    a = rng.standard_normal((32, 8)).astype(np.float32)
    idx = rng.integers(0, 32, 20)
    y = lf.index_select(lf.from_array(a, chunks=(8, 8)), 0, idx)
    with lf.profile() as on_vulkan:
        assert y.compute().tobytes() == a[idx].tobytes()
    with lf.profile() as on_cpu:
        assert y.compute(backend="cpu", scheduler="threads").tobytes() == a[idx].tobytes()
    assert {b for b, _ in on_vulkan.where} == {"Vulkan"} and {b for b, _ in on_cpu.where} == {"Cpu"}
    assert y.persist(backend="cpu").compute(backend="cpu").tobytes() == a[idx].tobytes()
    assert lf.config.backend == "vulkan"  # the call's block is closed


def test_a_pinned_worker_reads_its_environment_again(monkeypatch):
    from lazyfuel.distributed import PinDevice

    monkeypatch.setenv("LAZYFUEL_DEVICE", "0")  # both restored after the test
    monkeypatch.setenv("LAZYFUEL_DEVICES", "0")
    assert lf.config.device == "0"
    PinDevice([3]).setup(type("Worker", (), {"name": 0})())
    assert lf.config.device == lf.config.devices == "3"


def test_the_readme_table_lists_every_knob():
    text = (REPO / "README.md").read_text()
    table = text[text.index("## Configuration"):]
    rows = {line.split("|")[1].strip(" `"): line for line in table.splitlines()
            if line.startswith("| `")}
    missing = [k.name for k in KNOBS.values() if not k.name.startswith("_") and k.name not in rows]
    assert missing == []
    for knob in KNOBS.values():
        if not knob.name.startswith("_"):
            assert f"`{knob.env}`" in rows[knob.name], knob.name
    assert settings.OTHER_VARIABLES  # the other variables read with them are named in settings.py


def test_the_wide_switch_reaches_the_specialisation_constants(vulkan):
    """`_force_wide` picks the 64-bit-position pipeline (constant 2); quads (constant 5) are the
    kernel's, which the gather_scalar binding builds without."""
    from lazyfuel.backends.vulkan import get_pool
    from lazyfuel.backends.vulkan.kernels import spec_constants

    with get_pool().batch() as batch:
        plain = spec_constants(batch, "gather", False)
        with lf.config(_force_wide=True):
            switched = spec_constants(batch, "gather", False, quads=False)
    assert (plain[2], plain[5]) == (0, 1) and (switched[2], switched[5]) == (1, 0)
