"""The task body (`graph.task`): an empty block runs nothing. Its input specs are tested in
test_task_inputs."""

from __future__ import annotations

import numpy as np

from lazyfuel.graph.task import BlockRecipe, run_block


def test_an_empty_block_runs_nothing():
    made = BlockRecipe((), None, (), (0, 3), np.dtype(np.float32))
    out = run_block(made, None)
    assert out.shape == (0, 3) and out.dtype == np.float32
