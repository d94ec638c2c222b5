"""A transpose feeding a gather: lazyfuel makes the view contiguous on the device and runs it and
the gather as one task per block. `lf.explain` shows the plan; `lf.profile` what ran."""

import os

import numpy as np

import lazyfuel as lf

# Show the Vulkan plan (lavapipe on a machine without a GPU). Left on "auto", the planner picks
# the cheaper backend per block by measured cost, which for blocks this small may be numpy.
os.environ.setdefault("LAZYFUEL_BACKEND", "vulkan")

rng = np.random.default_rng(0)
a = rng.standard_normal((2048, 512), dtype=np.float32)
idx = rng.integers(0, 2048, (512, 256))  # for each of the 512 columns, 256 row picks

x = lf.from_array(a, chunks=(2048, 128))
y = lf.gather(x.T, 1, idx)               # out[c, j] = a[idx[c, j], c]; x.T is a view
y = lf.masked_fill(y, idx % 7 == 0, 0.0)  # fused into the same task

print(lf.explain(y))                      # bindings, the inserted Contiguize and why, the cost
with lf.profile() as p:
    out = y.compute()
print("profile:", p)

want = np.where(idx % 7 == 0, np.float32(0), np.take_along_axis(a.T, idx, axis=1))
assert np.array_equal(out, want)
print("matches numpy:", out.shape, out.dtype)
