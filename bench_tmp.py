import time, tempfile, numpy as np, dask.array as da, lazyfuel as lf, zarr
from lazyfuel import zarr_io
d = tempfile.mkdtemp()
x = np.random.default_rng(0).standard_normal((4096, 4096)).astype(np.float32)
lf.from_array(x, chunks=(512, 4096)).to_zarr(f"{d}/a.zarr")
def best(f):
    out = []
    for _ in range(5):
        s = time.perf_counter(); f(); out.append(time.perf_counter() - s)
    return min(out)
print("lf verified      ", best(lambda: lf.from_zarr(f"{d}/a.zarr").compute()))
print("lf over plain    ", best(lambda: lf.asarray(da.from_zarr(f"{d}/a.zarr")).compute()))
print("dask verified    ", best(lambda: zarr_io.read(f"{d}/a.zarr").compute()))
print("dask plain       ", best(lambda: da.from_zarr(f"{d}/a.zarr").compute()))
z = zarr.open_array(f"{d}/a.zarr")
print("zarr whole       ", best(lambda: z[:]))
