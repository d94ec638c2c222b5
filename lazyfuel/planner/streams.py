"""Which program inputs are read as streams: once, in order, in long runs (decision 47).

A page-locked input that every step reading it reads that way is bound in place by the Vulkan
executor (`transfer.upload_all`): the kernel reads it over the link instead of a copy engine
moving it first (on the H200 kernels move data both ways over the link at once, copy engines one
way at a time). The rule is a property of each step's op kind and params, so it is part of the
plan (`Program.streamed_inputs`), not a choice of the executor; each op spec says it (`OpSpec.streams`):

- masked_fill reads its data and mask once, in order;
- index_select (contiguous or strided source) and select_fill read their indices once, and their
  source as a stream when they pick no more rows than it has and each row holds at least
  `STREAMED_ROW_BYTES` (`ops/index_select.py`); select_fill reads its mask once, in order;
- gather's scattered elements, Contiguize's views and the FFTs are not streams.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lazyfuel.ops import find
from lazyfuel.ops.index_select import STREAMED_ROW_BYTES  # noqa: F401 - the rule's threshold, read by tests

if TYPE_CHECKING:
    from lazyfuel.planner.program import Program, Step

def reads_as_stream(step: Step, k: int) -> bool:
    """Whether `step` reads its argument `k` once, in order, in long runs: its op spec's `streams`
    rule (an op without one streams nothing)."""
    spec = find(step.binding.op_kind)
    if spec is None or spec.streams is None:
        return False
    return spec.streams(step.param, k, step.out_dtype.itemsize)


def streamed_inputs(program: Program) -> tuple[bool, ...]:
    """For each input of `program`, whether every step that reads it reads it as a stream."""
    streamed = [True] * program.n_inputs
    for step in program.steps:
        for k, value in enumerate(step.args):
            if value < program.n_inputs and not reads_as_stream(step, k):
                streamed[value] = False
    return tuple(streamed)
