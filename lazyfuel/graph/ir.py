"""lazyfuel's own graph: the immutable op nodes behind every `lazyfuel.Array` (one import for all).

A node knows its shape, numpy dtype, chunks and a deterministic `name` (a token of its op, its
parameters and its inputs' names), and nothing about how it will run. There are

- leaves: `Source` (a dask array) and `Rechunk` (a dask rechunk of a lowered node);
- views (`Transpose`, `Slice`, `Broadcast`): they move no data; each output block is a numpy view
  of exactly one block of the input, given by `input_block(block)`;
- ops (`Contiguize`, `MaskedFill`, `IndexSelect`, `Gather`, and `graph.fft.Transform`): what
  kernels run; each names its `op_kind`;
- `Deferred`: a select on lazy indices of unknown chunk sizes, standing for the real one until
  the sizes are needed.

Building nodes does no checking of user input (`graph.ops` does that) and runs nothing.

The classes live by family: `graph.nodes` (the base, leaves, `Deferred`), `graph.view_nodes`,
`graph.op_nodes`; they are all importable from here.
"""

from lazyfuel.graph.indices import HASHED_INDEX_BYTES, Indices
from lazyfuel.graph.nodes import Deferred, Node, Rechunk, Source, Unary, ViewOp, nbytes, resolved
from lazyfuel.graph.op_nodes import Contiguize, Gather, IndexSelect, MaskedFill, Select
from lazyfuel.graph.view_nodes import Broadcast, Slice, Transpose, View

__all__ = ["HASHED_INDEX_BYTES", "Broadcast", "Contiguize", "Deferred", "Gather", "IndexSelect",
           "Indices", "MaskedFill", "Node", "Rechunk", "Select", "Slice", "Source", "Transpose", "Unary",
           "View", "ViewOp", "nbytes", "resolved"]
