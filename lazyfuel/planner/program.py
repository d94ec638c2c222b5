"""Programs: the planner's output and the unit a backend executor runs as one batch.

A `Program` is a straight-line list of `Step`s over numbered values. Values `0 … n_inputs-1` are
the host arrays handed to the executor (possibly strided, offset, reversed or broadcast views);
value `n_inputs + i` is the output of step `i`. Every step of a program runs on one backend, so a
Vulkan executor records the whole program into one command buffer and keeps intermediates on the
device; only the values named in `outputs` come back to the host.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from lazyfuel.contracts.model import Backend
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.planner.choice import Choice
from lazyfuel.planner.streams import streamed_inputs
from lazyfuel.registry.model import Binding


@dataclass(frozen=True)
class Step:
    """Run `binding` on the values `args`, with `params`, producing one contiguous value.

    `params` holds the contract's op-param fields by name (a Contiguize step's params are
    `shape`, `strides`, `offset`: the layout of its argument relative to that value's memory span).
    `reason` says why the planner inserted the step (for `explain`), empty for requested work.
    """

    binding: Binding
    args: tuple[int, ...]
    params: tuple[tuple[str, Any], ...]
    out_shape: tuple[int, ...]
    out_dtype: DType
    cost: float = 0.0
    reason: str = ""

    @property
    def param(self) -> dict[str, Any]:
        """`params` as a dict."""
        return dict(self.params)


@dataclass(frozen=True)
class Program:
    """Steps over numbered values; see the module docstring."""

    input_dtypes: tuple[DType, ...]
    input_layouts: tuple[Layout, ...]
    steps: tuple[Step, ...]
    outputs: tuple[int, ...]
    # the planner's decisions (backend, then each select node), for `explain`; not part of the plan
    choices: tuple[Choice, ...] = field(default=(), compare=False)
    # estimated seconds of moving the inputs in and the results out (one submit included), where
    # the cost model prices them apart from the steps (a device-clocked backend: `judge.transfers`)
    transfer_cost: float = 0.0
    # the bytes of each array moved over each device link, up (host to device) and down, given where
    # the inputs were and the result is wanted (`planner.placement.link_bytes`), for `explain`
    links: tuple[tuple[Backend, tuple[int, ...], tuple[int, ...]], ...] = field(default=(), compare=False)

    @property
    def n_inputs(self) -> int:
        return len(self.input_dtypes)

    @cached_property
    def binding_names(self) -> tuple[str, ...]:
        """Each step's binding as text (what `lf.profile` counts), made once per plan."""
        return tuple(str(s.binding) for s in self.steps)

    @cached_property
    def streamed_inputs(self) -> tuple[bool, ...]:
        """For each input, whether every step reading it reads it once, in order, in long runs
        (`planner.streams`): what a backend may read in place over the link."""
        return streamed_inputs(self)

    @property
    def cost(self) -> float:
        """Estimated seconds: the sum of the steps' costs and the transfer cost."""
        return sum(s.cost for s in self.steps) + self.transfer_cost

    @property
    def steps_cost(self) -> float:
        """Estimated seconds of the steps alone."""
        return sum(s.cost for s in self.steps)

    def transfer_bytes(self) -> tuple[list[int], list[int]]:
        """Bytes moved in per input (its memory span) and out per result computed on the device
        (a result that is an input as it is comes back without the device)."""
        up = [lay.span * d.itemsize for d, lay in zip(self.input_dtypes, self.input_layouts)]
        down = [math.prod(shape) * dtype.itemsize
                for shape, dtype in (self.value_meta(v) for v in self.outputs if v >= self.n_inputs)]
        return up, down

    @property
    def backend(self):
        """The one backend all steps run on (None for a program with no steps)."""
        return self.steps[0].binding.backend if self.steps else None

    def value_meta(self, value: int) -> tuple[tuple[int, ...], DType]:
        """Shape and dtype of value number `value` (an input's, or a step's output)."""
        if value < self.n_inputs:
            return self.input_layouts[value].shape, self.input_dtypes[value]
        step = self.steps[value - self.n_inputs]
        return step.out_shape, step.out_dtype
