"""The op nodes kernels run (`graph.op_nodes`), as `lf` builds them: each names its op kind, takes its
shape, dtype and chunks from its inputs, and lowers to numpy's bits."""

from __future__ import annotations

import numpy as np

import lazyfuel as lf
from lazyfuel.graph.op_nodes import Contiguize, Gather, IndexSelect, MaskedFill


def test_each_op_node_names_its_kind_and_takes_shape_and_chunks_from_its_inputs(bits_equal) -> None:
    rng = np.random.default_rng(51)
    a = rng.standard_normal((6, 4)).astype(np.float32)
    x = lf.from_array(a, chunks=(4, 4))
    idx, mask = np.array([5, 0, 5]), rng.random((3, 4)) < 0.5
    selected = lf.index_select(x, 0, idx)
    node = selected._node
    assert isinstance(node, IndexSelect) and node.op_kind == "IndexSelect" and node.label == "index_select"
    assert node.shape == (3, 4) and node.dtype == np.float32
    filled = lf.masked_fill(selected, mask, -2.0)._node
    assert isinstance(filled, MaskedFill) and filled.op_kind == "MaskedFill"
    assert filled.inputs[0] is node and filled.chunks == node.chunks and filled.value == -2.0
    gathered = lf.gather(x, 1, np.zeros((6, 2), int))._node
    assert isinstance(gathered, Gather) and gathered.op_kind == "Gather" and gathered.shape == (6, 2)
    copied = lf.contiguous(x.T)._node
    assert isinstance(copied, Contiguize) and copied.shape == (4, 6)
    bits_equal(lf.masked_fill(selected, mask, -2.0).compute(), np.where(mask, np.float32(-2), a[idx]))
