"""`lf.explain`: each fused node, its bindings, the Contiguize steps inserted and the cap behind each."""

from __future__ import annotations

import numpy as np

import lazyfuel as lf

A = np.arange(48, dtype=np.float32).reshape(6, 8)


def chain() -> lf.Array:
    x = lf.from_array(A, chunks=A.shape)
    return x.T.index_select(0, [3, 1]).masked_fill(np.array([True] * 6), 0.0)


def test_explain_names_inserted_contiguize_and_its_cap_on_vulkan(monkeypatch):
    monkeypatch.setenv("LAZYFUEL_BACKEND", "vulkan")
    text = lf.explain(chain())
    assert "1 fused node(s), backends [Vulkan]" in text
    assert "chain (one task, one program): IndexSelect -> MaskedFill" in text
    # whether the strided kernel or Contiguize + kernel wins depends on this machine's measurements;
    # both are listed with their costs either way; the broadcast mask is read in place
    # (masked_fill_broadcast), the kernel needing it contiguized is listed beside it
    assert "Contiguize(in0)" in text
    assert "inserted: index_select input source: contiguous: required (input is strided)" in text
    assert "masked_fill input mask: contiguous: required (input is broadcast_stride0)" in text
    assert "masked_fill_broadcast [lazyfuel-glsl-broadcast] reading its inputs as they are" in text
    assert "(IndexSelect,[F32,U32,F32],Vulkan)" in text and "estimated" in text
    assert "index_select_strided [lazyfuel-glsl-strided] reading its inputs as they are" in text
    strided_won = "via (IndexSelect,[F32,U32,F32],Vulkan) lazyfuel-glsl-strided" in text
    assert ("Contiguize step(s) inserted by the planner" not in text) if strided_won else \
        ("1 Contiguize step(s) inserted by the planner" in text)
    assert "backend: forced backend (LAZYFUEL_BACKEND=vulkan)" in text


def test_explain_shows_the_costs_compared_for_each_decision(monkeypatch):
    from lazyfuel.api import DefaultRuntime
    from lazyfuel.contracts.model import Backend
    from lazyfuel.graph.explain import explain_node
    from lazyfuel.planner import Planner
    from lazyfuel.providers import default_registry

    monkeypatch.delenv("LAZYFUEL_BACKEND", raising=False)
    planner = Planner(default_registry(), [Backend.Vulkan, Backend.Cpu])  # priors: no measurements
    text = explain_node(chain()._node, DefaultRuntime(), planner)
    assert "costs compared (3 decision(s); * = chosen):" in text
    backend = text[text.index("    backend: "):].splitlines()
    assert backend[0].startswith("    backend: cheaper (the next costs")
    assert {line.split("the whole chain on ")[-1] for line in backend[1:3]} == {"Vulkan", "Cpu"}
    assert all("(prior)" in line for line in backend[1:3])
    assert "IndexSelect (chain node 0): " in text and "MaskedFill (chain node 1): " in text


def test_explain_on_cpu_inserts_no_contiguize(monkeypatch):
    monkeypatch.setenv("LAZYFUEL_BACKEND", "cpu")
    text = lf.explain(chain())
    assert "backends [Cpu]" in text and "Contiguize" not in text
    assert "in0: F32[8, 6] strided - source from 1 chunk(s) along axis 0 viewed by transpose" in text


def test_explain_views_sources_and_several_groups(monkeypatch):
    monkeypatch.setenv("LAZYFUEL_BACKEND", "cpu")
    assert "nothing to run" in lf.explain(A)
    assert "views only" in lf.explain(lf.from_array(A)[::-1])
    c = lf.contiguous(lf.from_array(A, chunks=(2, 8)))
    text = lf.explain(c.index_select(0, [5, 0]))
    assert "2 fused node(s)" in text and "fused node 1: contiguize" in text
    assert "fused node 2: index_select" in text
