"""Planned fusions (`planner.fusion`): which index_select + masked_fill pairs may become one
SelectFill step, and how the planner chooses between the pair and the fused binding (costs,
measured or prior; an unmeasured fused kernel against a measured pair; the choice kept for
`explain`). No device runs here: the plans are checked, the kernels run in
tests/backends/vulkan/test_vulkan_select_fill.py."""

from __future__ import annotations

import pytest

from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.judge.costs import MeasuredCosts
from lazyfuel.judge.model import Judgement
from lazyfuel.layout import Layout
from lazyfuel.planner import Chain, OpNode, Planner
from lazyfuel.planner.fusion import fusable_pairs, fused_node, pinned_way
from lazyfuel.providers import default_registry
from lazyfuel.registry import Binding

SELECT = OpNode("IndexSelect", (0, 1), (("dim", 0),))
FILL = OpNode("MaskedFill", (3, 2), (("value", 1.5),))
PAIR = Chain(3, (SELECT, FILL), (4,))
LAYOUTS = [Layout.contiguous((64, 16)), Layout.contiguous((40,)), Layout.contiguous((40, 16))]
DTYPES = [DType.F32, DType.U32, DType.BOOL]


def test_the_pairs_found_are_a_select_read_only_by_a_fill_as_its_data() -> None:
    assert fusable_pairs(PAIR) == {1: 0}
    assert fusable_pairs(Chain(3, (SELECT, FILL), (3, 4))) == {}  # the select is returned too
    twice = Chain(3, (SELECT, FILL, OpNode("MaskedFill", (3, 2), (("value", 0.0),))), (4, 5))
    assert fusable_pairs(twice) == {}  # two readers
    as_mask = Chain(3, (OpNode("IndexSelect", (2, 1), (("dim", 0),)), OpNode("MaskedFill", (0, 3),
                                                                              (("value", 0.0),))), (4,))
    assert fusable_pairs(as_mask) == {}  # the select is the fill's mask, not its data
    viewed = Chain(3, (SELECT, OpNode("transpose", (3,), (("axes", None),)),
                       OpNode("MaskedFill", (4, 2), (("value", 0.0),))), (5,))
    assert fusable_pairs(viewed) == {}  # a view between
    node = fused_node(SELECT, FILL)
    assert (node.op, node.args, node.attr) == ("SelectFill", (0, 1, 2), {"dim": 0, "value": 1.5})


def test_pins_decide_before_costs() -> None:
    assert pinned_way(frozenset({"select_fill"}), ["index_select", "masked_fill"], ["select_fill"]) == "fused"
    assert pinned_way(frozenset({"masked_fill"}), ["index_select", "masked_fill"], ["select_fill"]) == "pair"
    assert pinned_way(frozenset({"gather"}), ["index_select", "masked_fill"], ["select_fill"]) is None


def _vulkan(op: OpKind, source: str | None = None) -> Binding:
    return next(b for b in default_registry().bindings() if b.op_kind is op and b.backend is Backend.Vulkan
                and b.dtypes[0] is DType.F32 and (source is None or b.kernel_source == source))


def _judged(per_byte: dict[Binding, float]) -> MeasuredCosts:
    """Measurements of 10 µs a dispatch (a program 20 µs) and the given seconds per byte."""
    return MeasuredCosts({b: Judgement("k", "fp", b.kernel_source, b.symbol, "[F32]", b.revision_hash, 2e-5,
                                       s, 1e-5, 0.0, (), True, "now") for b, s in per_byte.items()})


def _plan(costs: MeasuredCosts | None, kind: str = "discrete"):
    planner = Planner(default_registry(), [Backend.Vulkan], costs=costs, device_kinds={Backend.Vulkan: kind})
    return planner.plan(PAIR, DTYPES, LAYOUTS)


def _kinds(program) -> list[str]:
    return [s.binding.op_kind.name for s in program.steps]


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_measured_costs_decide_and_the_choice_shows_both_plans() -> None:
    pair = {_vulkan(OpKind.IndexSelect): 1e-12, _vulkan(OpKind.MaskedFill): 1e-12}
    slow, fast = {**pair, _vulkan(OpKind.SelectFill): 1e-8}, {**pair, _vulkan(OpKind.SelectFill): 1e-13}
    program = _plan(_judged(slow))
    assert _kinds(program) == ["IndexSelect", "MaskedFill"]
    choice = program.choices[-1]
    assert choice.what == "index_select + masked_fill (chain nodes 0, 1)" and choice.why.startswith("cheaper")
    assert [c.plan for c in choice.candidates] == ["index_select [vulkan-slang] + masked_fill [vulkan-slang]",
                                                   "select_fill [lazyfuel-glsl]"]
    assert {c.source for c in choice.candidates} == {"measured"}
    assert _kinds(_plan(_judged(fast))) == ["SelectFill"]
    assert _kinds(_plan(None)) == ["SelectFill"]  # the shared priors: one dispatch fewer


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_an_unmeasured_fused_kernel_is_taken_where_its_contract_allows_over_a_measured_pair() -> None:
    """A judge cache from before select_fill existed: its device prior is not weighed against
    measured steps; the contract's conditions decide (today's choice on a GPU), lavapipe included."""
    pair = _judged({_vulkan(OpKind.IndexSelect): 1e-12, _vulkan(OpKind.MaskedFill): 1e-12})
    program = _plan(pair)
    assert _kinds(program) == ["SelectFill"]
    assert program.choices[-1].why.startswith("the fused kernel is not measured yet")
    assert _kinds(_plan(pair, kind="cpu")) == ["IndexSelect", "MaskedFill"]
