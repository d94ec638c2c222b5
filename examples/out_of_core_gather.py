"""Out-of-core gather, zarr to zarr: keep k columns of every row of a table on disk.

lazyfuel reads the source store chunk by chunk and writes each output chunk as it is made, so the
table can be far larger than memory. Run:  python examples/out_of_core_gather.py [ROWS] [FOLDER]
(default 131072 rows x 256 float32 = 128 MiB in a temporary folder; 33554432 rows is 32 GiB).
"""

import sys
import tempfile
from pathlib import Path

import dask.array as da
import numpy as np
import zarr

import lazyfuel as lf

rows = int(sys.argv[1]) if len(sys.argv) > 1 else 131072
folder = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(tempfile.mkdtemp(prefix="lazyfuel-"))
cols, k, chunk = 256, 32, 8192

# 1. A source store, written chunk by chunk (never whole in memory).
source = folder / "table.zarr"
if not source.exists():
    table = da.random.default_rng(0).standard_normal((rows, cols), chunks=(chunk, cols), dtype=np.float32)
    da.to_zarr(table, str(source))

# 2. Per row, k column numbers (lazy too: they are made chunk by chunk as the gather needs them).
picks = da.random.default_rng(1).integers(0, cols, (rows, k), chunks=(chunk, k))

# 3. The gather along dim 1, stored straight into another zarr store.
features = lf.gather(lf.from_zarr(source), 1, picks)
features.to_zarr(folder / "features.zarr", overwrite=True)

# Check a band of rows against numpy.
out = zarr.open_array(str(folder / "features.zarr"), mode="r")
src = zarr.open_array(str(source), mode="r")
band = slice(rows // 2, rows // 2 + 1000)
assert np.array_equal(out[band], np.take_along_axis(src[band], picks[band].compute(), axis=1))
print(f"gathered {k} of {cols} columns from {rows} rows: {source} -> {folder / 'features.zarr'} "
      f"{out.shape} {out.dtype}")
