"""The graph's one import (`graph.ir`): every node class, from whichever family module holds it."""

from __future__ import annotations

from lazyfuel.graph import ir, nodes, op_nodes, view_nodes


def test_every_node_class_is_importable_from_ir_as_its_family_defines_it() -> None:
    for family in (nodes, op_nodes, view_nodes):
        for name in ir.__all__:
            if name in vars(family) and getattr(family, name).__module__ == family.__name__:
                assert getattr(ir, name) is getattr(family, name), name
    assert {"Node", "Source", "IndexSelect", "Transpose", "Deferred"} <= set(ir.__all__)
    assert all(hasattr(ir, name) for name in ir.__all__)
