"""dask.distributed with one worker process per GPU, each pinned to its device (as dask-cuda does).

A worker process builds its own device pools on first use (docs/architecture.md). `PinDevice` is a
`WorkerPlugin` that, when a worker starts (before any task can open a pool), sets
`LAZYFUEL_DEVICE` and `LAZYFUEL_DEVICES` in that worker process to one device, chosen by the
worker's rank (its name in a `LocalCluster`: 0, 1, …) from the list it was given. Every block that
worker computes then runs on that device, so n workers drive n GPUs while the scheduler balances
blocks between them. Placement through dask annotations is not used: dask's array optimisation
drops them.

    from lazyfuel.distributed import local_gpu_cluster
    with local_gpu_cluster() as cluster, Client(cluster):   # one worker per GPU of LAZYFUEL_DEVICES
        y.compute()

or, on a cluster of your own whose workers are named 0 … n-1:
`client.register_plugin(PinDevice(["0", "1"]))`. `worker_device()` says, inside a worker, which
device it pinned and which pool it uses (`client.run(worker_device)`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from distributed import Client, LocalCluster, WorkerPlugin

from lazyfuel.backends import catalog
from lazyfuel.settings import config


class PinDevice(WorkerPlugin):
    """Pins each worker to `devices[rank % len(devices)]` (an index or a name substring);
    `devices` None: device `rank`. One device (`PinDevice(1)`) pins every worker to it."""

    name = "lazyfuel-pin-device"

    def __init__(self, devices: Sequence[int | str] | int | str | None = None) -> None:
        if isinstance(devices, (int, str)):
            devices = [devices]
        self.devices = None if devices is None else tuple(str(d).strip() for d in devices)
        if self.devices is not None and (not self.devices or not all(self.devices)):
            raise ValueError(f"PinDevice needs at least one device and no empty names, got {devices!r}")

    def device_for(self, rank: int) -> str:
        """The device a worker of rank `rank` is pinned to."""
        return str(rank) if self.devices is None else self.devices[rank % len(self.devices)]

    def setup(self, worker: Any) -> None:
        """Pin this worker process: set `LAZYFUEL_DEVICE` and `LAZYFUEL_DEVICES` to its device."""
        device = self.device_for(worker_rank(worker))
        os.environ["LAZYFUEL_DEVICE"] = device
        os.environ["LAZYFUEL_DEVICES"] = device
        config.reload()  # the process's base config is its environment


def worker_rank(worker: Any) -> int:
    """The worker's rank: its name when that is an integer (as `LocalCluster` names workers)."""
    name = worker.name
    if isinstance(name, int) or (isinstance(name, str) and name.isdigit()):
        return int(name)
    raise ValueError(f"worker {name!r}: PinDevice needs workers named 0, 1, … (LocalCluster does "
                     "this; with dask-worker pass --name 0, --name 1, …) or one device: PinDevice(i)")


def worker_device() -> dict[str, Any]:
    """In a worker (`client.run(worker_device)`): its pid, the device it pinned, and the pool that
    device opens (`pool`: id, `index`, `label`)."""
    pool = catalog.pinnable().default_pool()
    return {"pid": os.getpid(), "pinned": config.device,
            "pool": pool["id"], "index": pool["index"], "label": pool["label"]}


def local_gpu_cluster(n_workers: int | None = None, devices: Sequence[int | str] | None = None,
                      threads_per_worker: int = 2, **kwargs: Any) -> LocalCluster:
    """A `LocalCluster` of worker processes, one per device, each pinned by `PinDevice`.

    `devices` (default: the devices blocks are spread over here, `LAZYFUEL_DEVICES`): the device
    of each worker in rank order; `n_workers` defaults to their number. Other keyword arguments go
    to `LocalCluster` (e.g. `dashboard_address=None`).
    """
    if devices is None:
        devices = catalog.pinnable().spread_devices()
    plugin = PinDevice(list(devices))
    n = len(plugin.devices or ()) if n_workers is None else n_workers
    kwargs.setdefault("dashboard_address", None)
    cluster = LocalCluster(n_workers=n, threads_per_worker=threads_per_worker, processes=True, **kwargs)
    try:
        with Client(cluster) as client:
            client.register_plugin(plugin)  # kept by the scheduler for workers that (re)start
    except BaseException:
        cluster.close()
        raise
    return cluster
