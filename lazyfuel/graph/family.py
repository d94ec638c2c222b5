"""Which backend each op prefers, so that fusion cuts a chain where its ops' families part.

Every program runs on one backend. A chain `gather -> masked_fill -> rfft` fused into one task
could only plan on a backend with bindings for all three, which here is the numpy reference: the
selects would leave the Vulkan device and the FFT its OpenCL provider. `Families(planner)` answers,
per op node, its *preferred backend*: the first of the planner's backends (in their priority
order) with a binding for the node's op kind and data dtype. `Partition.of` fuses an op into its
consumer's task only when both prefer the same backend; otherwise the op's result becomes a
chunk of its own, handed to the next task through host memory (a numpy chunk between two dask
tasks). No op kind is named here: the registry decides.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.graph.ir import Node, Rechunk, Source
from lazyfuel.planner import Planner


class Families:
    """`families(node)`: the backend `node`'s op prefers, or None (no backend binds it).

    Takes the planner or a callable returning it, called on the first question only (building a
    planner opens the devices; a graph with no op feeding another never asks).
    """

    def __init__(self, planner: Planner | Callable[[], Planner]) -> None:
        self._planner = planner
        self._found: dict[tuple[str, DType], Backend | None] = {}
        self._lock = threading.Lock()

    def __call__(self, node: Node) -> Backend | None:
        key = (node.op_kind, DType.from_numpy(node.inputs[0].dtype))
        with self._lock:
            if key not in self._found:
                self._found[key] = self._preferred(*key)
            return self._found[key]

    def of_group(self, node: Node) -> Backend | None:
        """The backend the op computing a group's result prefers (None: views of a leaf only)."""
        while not hasattr(node, "op_kind") and node.inputs and not isinstance(node, (Source, Rechunk)):
            node = node.inputs[0]
        return self(node) if hasattr(node, "op_kind") else None

    def _preferred(self, op: str, dtype: DType) -> Backend | None:
        if not isinstance(self._planner, Planner):
            self._planner = self._planner()
        kind = OpKind.parse(op)
        bound = {b.backend for b in self._planner.registry.of_kind(kind) if b.dtypes[0] == dtype}
        return next((b for b in self._planner.backends if b in bound), None)
