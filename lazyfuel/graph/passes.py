"""Writing a large select over a zarr store in passes, so the result is never held whole.

A select over a zarr source reads each touched chunk once (`graph.stored`) and cuts it into
pieces for every output block that wants rows of it. With random indices every output block
wants rows of nearly every chunk, so no output block can be written before every chunk has been
read: the pieces of the whole result are held at once. `write_slabs` cuts such a select, when its
result is larger than `lazyfuel.config.read_budget`, into slabs of whole output chunks along its
axis, each at most the budget (at least one chunk): `to_zarr` computes and writes them one after
another, each slab reading only the rows it needs (each touched chunk once per slab), so at most
one slab's pieces are held. A result within the budget is one slab: one read of each chunk.
"""

from __future__ import annotations

import math

from lazyfuel.graph import ops
from lazyfuel.graph.ir import Gather, IndexSelect, Node, Source


def write_slabs(node: Node, budget: int) -> tuple[int, list[tuple[int, Node]]] | None:
    """(the axis, [(first index along it, the slab's select)]) when `node` is an index_select or
    gather with concrete indices straight over a zarr source and its result is larger than
    `budget` bytes; None otherwise (write it whole)."""
    source = getattr(node, "data", None)
    if not (isinstance(node, (IndexSelect, Gather)) and isinstance(source, Source) and source.zarr is not None
            and not node.indices.lazy):
        return None
    nbytes = math.prod(node.shape) * node.dtype.itemsize
    d, along = node.dim, node.chunks[node.dim]
    if nbytes <= budget or len(along) < 2:
        return None
    per_chunk = nbytes // node.shape[d] * along[0]
    step = max(1, budget // max(per_chunk, 1)) * along[0]
    values = node.indices.values
    slabs = []
    for lo in range(0, node.shape[d], step):
        if isinstance(node, IndexSelect):
            slab = ops.index_select(source, d, values.reshape(-1)[lo:lo + step])
        else:
            slab = ops.gather(source, d, values[(slice(None),) * d + (slice(lo, lo + step),)])
        slabs.append((lo, slab))
    return d, slabs
