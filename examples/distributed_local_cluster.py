"""A lazyfuel pipeline on a dask.distributed LocalCluster of worker processes.

Each worker process opens its own device pool on first use; the graph travels to the workers as
ordinary dask tasks. Swap the LocalCluster for `Client("tcp://scheduler:8786")` to use a real
cluster (workers must reach the same data). Run:  python examples/distributed_local_cluster.py
"""

import dask.array as da
import numpy as np
from dask.distributed import Client, LocalCluster

import lazyfuel as lf


def main() -> None:
    # The table is made on the workers, chunk by chunk (a numpy array would be shipped inside the
    # graph); ids and mask are small and travel with it.
    table = da.random.default_rng(0).standard_normal((100_000, 64), chunks=(25_000, 64), dtype=np.float32)
    rng = np.random.default_rng(1)
    ids = np.sort(rng.integers(0, len(table), 20_000))
    drop = rng.random((20_000, 64)) < 0.1

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        rows = lf.index_select(lf.from_array(table), 0, ids)
        batch = lf.masked_fill(rows, drop, 0.0)
        out = client.compute(batch.to_dask()).result()  # or dask.compute(batch) with the client active

    want = np.where(drop, np.float32(0), table.compute()[ids])
    assert np.array_equal(out, want)
    print(f"2 worker processes computed {out.shape} {out.dtype}; matches numpy")


if __name__ == "__main__":  # worker processes import this file: keep the work under main
    main()
