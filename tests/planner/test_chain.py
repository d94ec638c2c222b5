"""Chains (`planner.chain`): op nodes over numbered values, hashable (plans are cached by them), and
the inputs a select reads as its indices, found through views."""

from __future__ import annotations

from lazyfuel.planner.chain import INDEX_OPS, Chain, OpNode, encode_key


def test_nodes_and_chains_are_values_with_their_attrs_as_a_dict() -> None:
    node = OpNode("MaskedFill", (0, 1), (("value", 2.0),))
    assert node.attr == {"value": 2.0}
    chain = Chain(2, (node,), (2,))
    assert chain == Chain(2, (OpNode("MaskedFill", (0, 1), (("value", 2.0),)),), (2,))
    assert len({chain, Chain(2, (node,), (2,))}) == 1


def test_index_inputs_are_found_through_views_and_only_for_selects() -> None:
    assert set(INDEX_OPS) >= {"IndexSelect", "Gather"} and "MaskedFill" not in INDEX_OPS
    chain = Chain(3, (OpNode("getitem", (1,), (("key", encode_key((slice(None, None, -1),))),)),  # v3
                      OpNode("IndexSelect", (0, 3), (("dim", 0),)),  # v4: indices through the view
                      OpNode("MaskedFill", (4, 2), (("value", 0),))), (5,))
    assert chain.index_inputs == frozenset({1})
    computed = Chain(2, (OpNode("Contiguize", (1,), ()), OpNode("Gather", (0, 2), (("dim", 0),))), (3,))
    assert computed.index_inputs == frozenset()  # indices computed by a step, not an input
