"""The judge's workloads (`judge.workloads`): every op's ladder of workloads, built by its spec, runs on
its Cpu binding (else its first), and the spec's numpy reference reproduces it."""

from __future__ import annotations

import numpy as np
import pytest

from lazyfuel.backends.base import executor
from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.judge.workloads import program_for
from lazyfuel.layout import Layout, memory_span
from lazyfuel.ops import spec_for
from lazyfuel.ops.common import elementwise
from lazyfuel.providers import default_registry


@pytest.mark.parametrize("kind", list(OpKind), ids=str)
def test_each_spec_builds_a_judge_workload_its_reference_reproduces(kind: OpKind) -> None:
    """The judge's workloads of every op (built by its spec's ladder) run on its Cpu binding (else
    its first), and the spec's numpy reference gives the same bits (data movers) or agrees within
    the contract."""
    found = [b for b in default_registry().bindings()
             if b.op_kind is kind and b.dtypes[0] in (DType.F32, DType.C64)]
    binding = next((b for b in found if b.backend is Backend.Cpu), found[0])
    spec = spec_for(kind)
    for timed in spec.ladder(binding.contract, binding.dtypes, 300, np.random.default_rng(7)):
        workload = program_for(binding, timed.inputs, timed.attrs, view=timed.view)
        (got,) = executor(binding.backend).run(workload.program, list(workload.inputs))
        source = timed.inputs[0] if timed.view is None else _viewed(timed.inputs[0], timed.view)
        want = spec.reference([source, *timed.inputs[1:]], timed.attrs)
        assert spec.compare(got, want, binding.dtypes[-1], binding.contract, timed.attrs) is None
        if spec.compare is elementwise:
            assert got.tobytes() == want.tobytes()


def _viewed(a: np.ndarray, view: Layout) -> np.ndarray:
    """The view `view` of `a`'s memory span (what a Contiguize step copies)."""
    span = memory_span(a).view(a.dtype)
    return np.lib.stride_tricks.as_strided(span[view.offset:], view.shape,
                                           tuple(s * span.itemsize for s in view.strides))
