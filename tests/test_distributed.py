"""dask.distributed with one worker process per device, each pinned by `PinDevice`.

One lavapipe here: both workers are pinned to device 0, each opens its own pool there, and the
graph computed on the cluster gives the same bits as numpy.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import pytest

import lazyfuel as lf

distributed = pytest.importorskip("distributed")

from lazyfuel.distributed import PinDevice, local_gpu_cluster, worker_device, worker_rank  # noqa: E402


def test_pin_device_chooses_by_rank(monkeypatch):
    assert [PinDevice().device_for(r) for r in range(3)] == ["0", "1", "2"]
    assert [PinDevice([1, "h200"]).device_for(r) for r in range(3)] == ["1", "h200", "1"]
    assert PinDevice(2).device_for(5) == "2"
    assert worker_rank(SimpleNamespace(name="3")) == 3
    with pytest.raises(ValueError, match="workers named 0, 1"):
        worker_rank(SimpleNamespace(name="tcp://10.0.0.1:4000"))
    with pytest.raises(ValueError, match="at least one device"):
        PinDevice([])
    monkeypatch.setenv("LAZYFUEL_DEVICES", "0,0")  # both restored after the test
    monkeypatch.setenv("LAZYFUEL_DEVICE", "0")
    PinDevice([7, 1]).setup(SimpleNamespace(name=1))
    assert os.environ["LAZYFUEL_DEVICE"] == os.environ["LAZYFUEL_DEVICES"] == "1"


def test_two_worker_processes_each_pinned_with_its_own_pool(vulkan):
    from lazyfuel.backends.vulkan import get_pool

    index = get_pool().info.index
    rng = np.random.default_rng(9)
    a = rng.standard_normal((96, 40)).astype(np.float32)
    idx = rng.integers(0, 40, 70)
    mask = rng.integers(0, 2, (96, 70)).astype(bool)
    with local_gpu_cluster(devices=[index, index], threads_per_worker=2) as cluster, \
            distributed.Client(cluster) as client:
        y = lf.from_array(a, chunks=(8, 40)).index_select(1, idx).masked_fill(mask, 7.0)
        out = y.compute()
        seen = client.run(worker_device)
    assert out.tobytes() == np.where(mask, np.float32(7.0), a[:, idx]).tobytes()
    reports = list(seen.values())
    assert len(reports) == 2 and len({r["pid"] for r in reports}) == 2
    assert os.getpid() not in {r["pid"] for r in reports}
    assert all(r["pinned"] == str(index) and r["index"] == index for r in reports)
