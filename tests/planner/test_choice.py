"""The planner's choice for a strided chunk: a strided-reading kernel vs Contiguize + a contiguous
kernel, priced alike (measurements where given, priors otherwise), ties to the declared first,
and every decision kept on the program for `explain`."""

from __future__ import annotations

import numpy as np
import pytest

from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.judge.costs import MeasuredCosts
from lazyfuel.judge.model import Judgement
from lazyfuel.layout import Layout
from lazyfuel.planner import Chain, OpNode, Planner, describe_choices
from lazyfuel.planner.chain import encode_key
from lazyfuel.planner.choice import Candidate, decide
from lazyfuel.providers import default_registry
from lazyfuel.registry import Binding

STRIDED = "lazyfuel-glsl-strided"
SHADER, COPY = "lazyfuel-glsl", "vulkan-copy-buffer"  # the two Contiguize bindings
SELECT = Chain(2, (OpNode("IndexSelect", (0, 1), (("dim", 0),)),), (2,))


def _layouts(source: np.ndarray) -> list[Layout]:
    return [Layout.of(source), Layout.contiguous((16,))]


def _transposed() -> np.ndarray:
    return np.zeros((64, 48), np.float32).T


def _vulkan(op: OpKind, source: str | None = None) -> Binding:
    return next(b for b in default_registry().bindings() if b.op_kind is op and b.backend is Backend.Vulkan
                and b.dtypes[0] is DType.F32 and (source is None or b.kernel_source == source))


def _judged(per_byte: dict[Binding, float], spread: float = 0.0) -> MeasuredCosts:
    """Measurements with no latency and the given seconds per byte (a cost model for the test)."""
    return MeasuredCosts({b: Judgement("k", "fp", b.kernel_source, b.symbol, "[F32]", b.revision_hash, 0.0,
                                       s, 0.0, spread, (), True, "now") for b, s in per_byte.items()})


def _plan(source: np.ndarray, costs: MeasuredCosts | None = None):
    planner = Planner(default_registry(), [Backend.Vulkan], costs=costs)
    return planner.plan(SELECT, [DType.F32, DType.U32], _layouts(source))


def _kinds(program) -> list[tuple[OpKind, str]]:
    return [(s.binding.op_kind, s.binding.kernel_source) for s in program.steps]


def test_with_priors_the_strided_kernel_wins_a_strided_chunk_and_both_plans_are_recorded() -> None:
    program = _plan(_transposed())
    assert _kinds(program) == [(OpKind.IndexSelect, STRIDED)]
    backend, node = program.choices
    assert backend.what == "backend" and backend.why == "only candidate"
    plans = [c.plan for c in node.candidates]
    assert plans[0].startswith("Contiguize(in0) (inserted: index_select input source: contiguous: "
                               "required (input is strided))")
    assert plans[1] == "index_select_strided [lazyfuel-glsl-strided] reading its inputs as they are"
    assert node.chosen == 1 and node.why.startswith("cheaper")
    assert node.candidates[0].cost > node.candidates[1].cost
    assert {c.source for c in node.candidates} == {"prior"}


def test_measured_costs_pick_contiguize_plus_kernel_when_strided_reading_is_slower() -> None:
    slow = {_vulkan(OpKind.IndexSelect, STRIDED): 1e-6, _vulkan(OpKind.IndexSelect, "vulkan-slang"): 1e-9,
            _vulkan(OpKind.Contiguize, SHADER): 1e-9,
            _vulkan(OpKind.IndexSelect, "lazyfuel-glsl-variant"): 2e-9}  # index_select_general
    program = _plan(_transposed(), _judged(slow))
    assert _kinds(program) == [(OpKind.Contiguize, "lazyfuel-glsl"), (OpKind.IndexSelect, "vulkan-slang")]
    node = program.choices[1]
    assert node.chosen == 0 and node.why.startswith("cheaper")
    assert {c.source for c in node.candidates} == {"measured"}
    fast = {**slow, _vulkan(OpKind.IndexSelect, STRIDED): 1e-9}
    assert _kinds(_plan(_transposed(), _judged(fast))) == [(OpKind.IndexSelect, STRIDED)]


def test_a_tie_within_the_noise_goes_to_the_declared_first_plan_every_time() -> None:
    # Contiguize moves the whole (48, 64) source (24576 bytes), index_select 8256 bytes: the strided
    # kernel at 3.9 ns per byte is 2% cheaper than both steps at 1 ns, well within a 20% spread.
    even = {_vulkan(OpKind.IndexSelect, STRIDED): 3.9e-9, _vulkan(OpKind.IndexSelect, "vulkan-slang"): 1e-9,
            _vulkan(OpKind.Contiguize, SHADER): 1e-9}
    for _ in range(3):  # fresh planners: the plan is stable
        program = _plan(_transposed(), _judged(even, spread=0.2))
        assert _kinds(program)[0] == (OpKind.Contiguize, "lazyfuel-glsl")
        assert program.choices[1].why.startswith("priority tie")


def test_a_contiguous_chunk_keeps_the_contiguous_kernel_on_priors() -> None:
    program = _plan(np.zeros((48, 64), np.float32))
    assert _kinds(program) == [(OpKind.IndexSelect, "vulkan-slang")]
    node = program.choices[1]
    assert [c.plan.split(" ")[0] for c in node.candidates] == ["index_select", "index_select_strided",
                                                               "index_select_general"]
    assert node.candidates[0].cost <= min(c.cost for c in node.candidates[1:])


def test_explain_text_lists_every_candidate_cost_and_the_forced_backend() -> None:
    program = _plan(_transposed())
    text = describe_choices(program, forced="LAZYFUEL_BACKEND=vulkan")
    assert "costs compared (2 decision(s); * = chosen):" in text
    assert "backend: forced backend (LAZYFUEL_BACKEND=vulkan)" in text
    assert "IndexSelect (chain node 0): cheaper (the next costs" in text
    lines = text.splitlines()
    chosen = [line for line in lines if line.strip().startswith("*")]
    assert any("index_select_strided" in line and "(prior)" in line for line in chosen)
    assert any(line.strip().startswith("- ~") and "Contiguize(in0)" in line for line in lines)


def test_decide_refuses_when_nothing_can_run_and_names_why_others_cannot() -> None:
    with pytest.raises(ValueError, match="no candidate can run"):
        decide("backend", [Candidate("the whole chain on Cpu", float("nan"), note="no binding")],
               lambda i, j: False)
    choice = decide("backend", [Candidate("a", float("nan"), note="no binding"), Candidate("b", 1.0)],
                    lambda i, j: False)
    assert choice.chosen == 1 and choice.why == "only candidate (the others cannot run it)"


ROWS_FROM_1 = OpNode("getitem", (0,), (("key", encode_key((slice(1, None),))),))
CONTIGUOUS = Chain(1, (ROWS_FROM_1, OpNode("Contiguize", (1,), ())), (2,))  # x[1:].contiguous()
SELECT_ROWS_FROM_1 = Chain(2, (ROWS_FROM_1, OpNode("IndexSelect", (2, 1), (("dim", 0),))), (3,))


def _contiguous(source: np.ndarray, costs: MeasuredCosts | None = None):
    planner = Planner(default_registry(), [Backend.Vulkan], costs=costs)
    return planner.plan(CONTIGUOUS, [DType.F32], [Layout.of(source)])


def _dense_offset() -> np.ndarray:
    """A (65, 64) source: the chains above read rows 1.., a dense view at a start offset."""
    return np.zeros((65, 64), np.float32)


def test_contiguize_of_a_dense_view_takes_the_cheaper_binding_either_way() -> None:
    copy, shader = _vulkan(OpKind.Contiguize, COPY), _vulkan(OpKind.Contiguize, SHADER)
    for fast, slow, winner in ((copy, shader, COPY), (shader, copy, SHADER)):
        program = _contiguous(_dense_offset(), _judged({fast: 1e-10, slow: 1e-9}))
        assert _kinds(program) == [(OpKind.Contiguize, winner)]
        _, node = program.choices
        assert node.what == "Contiguize of chain node 0 (explicit contiguous())"
        assert [c.plan for c in node.candidates] == ["copy_buffer [vulkan-copy-buffer]",
                                                     "contiguize [lazyfuel-glsl]"]
        assert node.winner.plan.endswith(f"[{winner}]") and node.why.startswith("cheaper (the next costs")
        assert {c.source for c in node.candidates} == {"measured"}


def test_contiguize_ties_go_to_the_buffer_copy_declared_first() -> None:
    copy, shader = _vulkan(OpKind.Contiguize, COPY), _vulkan(OpKind.Contiguize, SHADER)
    for costs in (None, _judged({copy: 1.02e-9, shader: 1e-9}, spread=0.1)):  # priors alike; within noise
        program = _contiguous(_dense_offset(), costs)
        assert _kinds(program) == [(OpKind.Contiguize, COPY)]
        assert program.choices[1].why.startswith("priority tie")


def test_a_strided_view_leaves_only_the_copy_shader_and_says_why() -> None:
    copy, shader = _vulkan(OpKind.Contiguize, COPY), _vulkan(OpKind.Contiguize, SHADER)
    program = _contiguous(np.zeros((64, 65), np.float32).T, _judged({copy: 1e-12, shader: 1e-9}))
    assert _kinds(program) == [(OpKind.Contiguize, SHADER)]
    node = program.choices[1]
    assert node.why == "only candidate (the others cannot run it)"
    assert node.candidates[0].note == "strided: rejected"


def test_an_inserted_contiguize_is_chosen_by_cost_and_prices_the_select_candidate() -> None:
    """index_select of a source at a start offset: the contiguous kernel needs a Contiguize first;
    the cheaper Contiguize binding is the one priced in that candidate and the one inserted."""
    copy, shader = _vulkan(OpKind.Contiguize, COPY), _vulkan(OpKind.Contiguize, SHADER)
    plain, strided = _vulkan(OpKind.IndexSelect, "vulkan-slang"), _vulkan(OpKind.IndexSelect, STRIDED)
    for fast, slow, winner in ((copy, shader, COPY), (shader, copy, SHADER)):
        costs = _judged({fast: 1e-11, slow: 1e-9, plain: 1e-11, strided: 1e-8})
        program = Planner(default_registry(), [Backend.Vulkan], costs=costs).plan(
            SELECT_ROWS_FROM_1, [DType.F32, DType.U32], _layouts(_dense_offset()))
        assert _kinds(program) == [(OpKind.Contiguize, winner), (OpKind.IndexSelect, "vulkan-slang")]
        _, select, contiguize = program.choices
        assert contiguize.what.startswith("Contiguize of chain node 0 (index_select input source: ")
        assert contiguize.winner.plan.endswith(f"[{winner}]")
        two_steps = select.candidates[0].cost
        assert two_steps == pytest.approx(program.cost)


def test_explain_shows_both_contiguize_costs() -> None:
    copy, shader = _vulkan(OpKind.Contiguize, COPY), _vulkan(OpKind.Contiguize, SHADER)
    program = _contiguous(_dense_offset(), _judged({copy: 1e-9, shader: 2e-10}))
    text = describe_choices(program)
    assert ("Contiguize of chain node 0 (explicit contiguous()): cheaper (the next costs 5.00x as much)"
            in text)
    lines = text.splitlines()
    assert any(line.strip().startswith("* ~") and "(measured)  contiguize [lazyfuel-glsl]" in line
               for line in lines)
    assert any(line.strip().startswith("- ~") and "(measured)  copy_buffer [vulkan-copy-buffer]" in line
               for line in lines)
