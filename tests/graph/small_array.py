"""The small lazy array the graph-building tests build ops on: a (5, 6) float32 range in (2, 4) chunks."""

from __future__ import annotations

import numpy as np

import lazyfuel as lf

A = np.arange(30, dtype=np.float32).reshape(5, 6)


def x() -> lf.Array:
    return lf.from_array(A, chunks=(2, 4))
