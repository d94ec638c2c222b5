"""Splitting a block that runs out of memory (`graph.split`): the chain is run again in halves of its
output's leading axis, down to one row, and the pieces join bit-exact; a block that cannot be
split says why in the MemoryError."""

from __future__ import annotations

import numpy as np
import pytest

from lazyfuel.graph.split import halves, run_splitting
from lazyfuel.planner.chain import Chain, OpNode

SELECT_FILL = Chain(3, (OpNode("IndexSelect", (0, 1), (("dim", 0),)),
                        OpNode("MaskedFill", (3, 2), (("value", -1.0),))), (4,))


def _run_small(chain: Chain, inputs: list[np.ndarray]) -> np.ndarray:
    """numpy's select + fill of at most 2 rows; MemoryError for more (a device out of memory)."""
    assert chain == SELECT_FILL
    data, idx, mask = inputs
    if len(idx) > 2:
        raise MemoryError(f"out of memory for {len(idx)} rows")
    return np.where(mask, np.float32(-1.0), data[idx])


def test_a_block_out_of_memory_runs_in_halves_that_join_bit_exact() -> None:
    rng = np.random.default_rng(71)
    data = rng.standard_normal((8, 3)).astype(np.float32)
    idx, mask = rng.integers(0, 8, 7).astype(np.uint32), rng.random((7, 3)) < 0.5
    got = run_splitting(_run_small, SELECT_FILL, [data, idx, mask])
    assert got.tobytes() == np.where(mask, np.float32(-1.0), data[idx]).tobytes()
    (first, rest), why = halves(SELECT_FILL, [data, idx, mask])
    assert why == "" and [len(first[1][1]), len(rest[1][1])] == [3, 4]  # indices and mask halved
    assert first[1][0] is data and first[1][2].shape == (3, 3)  # the source is read whole


def test_a_block_that_cannot_be_split_says_why() -> None:
    data, idx, mask = np.zeros((4, 3), np.float32), np.zeros(1, np.uint32), np.zeros((1, 3), bool)

    def never(chain, inputs):
        raise MemoryError("out of memory")

    with pytest.raises(MemoryError, match=r"out of memory \(computing a block of shape \(1, 3\), which "
                                          r"is one row along its leading axis"):
        run_splitting(never, SELECT_FILL, [data, idx, mask])
    assert halves(Chain(1, (), (0, 0)), [data]) == (None, "has several outputs")
