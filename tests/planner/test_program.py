"""Programs (`planner.program`): steps over numbered values, their shapes and dtypes, costs summed,
the bytes moved in and out, and a planned program run bit-exact against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from planned import DTYPES, SHAPES, inputs, select_fill_program

from lazyfuel.backends.base import executor
from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.dtypes import DType


def test_a_programs_values_steps_and_costs() -> None:
    program = select_fill_program()
    assert program.n_inputs == 3 and program.backend is Backend.Cpu and program.outputs == (4,)
    assert [s.binding.op_kind for s in program.steps] == [OpKind.IndexSelect, OpKind.MaskedFill]
    assert program.steps[1].args == (3, 2)
    assert program.steps[1].param == {"fill_bytes": np.float32(-1).tobytes()}
    assert [program.value_meta(v) for v in range(5)] == [*zip(SHAPES, DTYPES), ((4, 5), DType.F32),
                                                         ((4, 5), DType.F32)]
    assert program.cost == pytest.approx(program.steps_cost + program.transfer_cost)
    assert program.binding_names == tuple(str(s.binding) for s in program.steps)
    assert program.transfer_bytes() == ([6 * 5 * 4, 4 * 4, 4 * 5], [4 * 5 * 4])


def test_a_planned_program_runs_bit_exact() -> None:
    data, idx, mask = inputs(21)
    (out,) = executor(Backend.Cpu).run(select_fill_program(), [data, idx, mask])
    assert out.tobytes() == np.where(mask, np.float32(-1), data[idx]).tobytes()
