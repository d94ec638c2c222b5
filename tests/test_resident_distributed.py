"""`persist(device=True)` on dask.distributed: each worker process holds the blocks it computed in
its own pool's memory, and a later graph over them gives numpy's bits (two workers on lavapipe)."""

from __future__ import annotations

import numpy as np
import pytest

import lazyfuel as lf

distributed = pytest.importorskip("distributed")

from lazyfuel.distributed import local_gpu_cluster  # noqa: E402


def _resident_bytes() -> int:
    """Device bytes of resident blocks in this (worker) process."""
    from lazyfuel.backends.vulkan import residency

    return sum(store.device_bytes for store in residency._STORES.values())


def test_each_worker_holds_its_own_resident_blocks(vulkan):
    from lazyfuel.backends.vulkan import get_pool

    index = get_pool().info.index
    rng = np.random.default_rng()
    a = rng.standard_normal((64, 32)).astype(np.float32)
    idx = rng.integers(0, 32, 50)
    mask = rng.random((64, 50)) < 0.5
    here = _resident_bytes()
    with local_gpu_cluster(devices=[index, index], threads_per_worker=1) as cluster, \
            distributed.Client(cluster) as client:
        xp = lf.from_array(a, chunks=(8, 32)).persist(device=True)
        distributed.wait(xp.to_dask())
        held = client.run(lambda: _resident_bytes())
        assert len(held) == 2 and sum(held.values()) == a.nbytes  # on the workers' own pools
        assert _resident_bytes() == here  # none in this process
        got = xp.index_select(1, idx).masked_fill(mask, -2.0).compute()
        with pytest.raises(RuntimeError, match="compute\\(device=True\\) needs the blocks in this "
                                               "process, and the graph holds Future"):
            xp.compute(device=True)
        del xp
    assert got.tobytes() == np.where(mask, np.float32(-2.0), a[:, idx]).tobytes()
