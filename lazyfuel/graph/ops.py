"""Building the graph for each op: user input checked when the op is built, then a node made.

Each function takes nodes (or numpy / dask input, made into sources) and returns a node; nothing
runs. Concrete (numpy, list, scalar) indices and masks are checked here with `lazyfuel.checks`,
so a bad index raises IndexError at the call, as in PyTorch; lazy ones (dask arrays, lazyfuel
nodes) have their dtype and shape checked here and their values checked when their chunks are
computed. Concrete indices are a snapshot: changing the caller's array after the op was built
changes nothing (`graph.indices`). A 0-d array behaves as one element along dim 0 (PyTorch):
ops see it as shape (1,) and the result is viewed back to 0-d.

The builders live by family (`graph.sources`, `graph.layout_ops`, `graph.slicing`,
`graph.fill_ops`, `graph.select_ops`) and are all importable from here.
"""

from lazyfuel.graph.fill_ops import masked_fill
from lazyfuel.graph.layout_ops import broadcast_to, contiguous, transpose
from lazyfuel.graph.select_ops import gather, index_select, unknown_sizes, with_sizes
from lazyfuel.graph.slicing import getitem
from lazyfuel.graph.sources import is_lazy, native_chunks, numpy_source, source, zarr_source

__all__ = ["broadcast_to", "contiguous", "gather", "getitem", "index_select", "is_lazy", "masked_fill",
           "native_chunks", "numpy_source", "source", "transpose", "unknown_sizes", "with_sizes",
           "zarr_source"]
