"""`lazyfuel.graph.family.Families`: the backend each op prefers is the first of the planner's
backends (in their order) with a binding for its op kind and data dtype, asked of the registry
alone; a group's op is found below its views; the planner is built on the first question only.
Real registries loaded from the shipped documents; no device is opened."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import lazyfuel as lf
from lazyfuel.contracts.model import Backend
from lazyfuel.graph.family import Families
from lazyfuel.planner import Planner
from lazyfuel.registry import Registry

CONTRACTS = Path(lf.__file__).parent / "contracts"


def planner(documents: tuple[str, ...], backends: tuple[Backend, ...]) -> Planner:
    registry = Registry()
    for name in documents:
        registry.load(CONTRACTS / name)
    return Planner(registry, backends)


def nodes():
    x = lf.from_array(np.zeros((4, 6), np.float32), chunks=2)
    mask = np.ones((4, 6), bool)
    return x, {"select": x.index_select(0, [1])._node, "fill": x.masked_fill(mask, 0)._node,
               "rfft": x.rfft()._node}


def test_the_first_backend_in_order_with_a_binding_is_preferred():
    _, n = nodes()
    both = Families(planner(("vulkan_select.md", "cpu.md"), (Backend.Vulkan, Backend.Cpu)))
    assert both(n["select"]) is both(n["fill"]) is Backend.Vulkan and both(n["rfft"]) is Backend.Cpu
    cpu_first = Families(planner(("vulkan_select.md", "cpu.md"), (Backend.Cpu, Backend.Vulkan)))
    assert cpu_first(n["select"]) is Backend.Cpu


def test_an_op_no_backend_binds_prefers_none():
    _, n = nodes()
    vulkan_only = Families(planner(("vulkan_select.md",), (Backend.Vulkan,)))
    assert vulkan_only(n["rfft"]) is None
    not_planned = Families(planner(("vulkan_select.md",), (Backend.Cpu,)))  # bound only on Vulkan
    assert not_planned(n["select"]) is None


def test_the_data_dtype_decides_too():
    c128 = lf.from_array(np.zeros((4, 4), np.complex128), chunks=2).index_select(0, [0])._node
    f32 = lf.from_array(np.zeros((4, 4), np.float32), chunks=2).index_select(0, [0])._node
    families = Families(planner(("vulkan_select.md", "cpu.md"), (Backend.Vulkan, Backend.Cpu)))
    assert families(f32) is Backend.Vulkan
    assert families(c128) is Backend.Cpu  # vulkan_select.md binds no complex select


def test_a_group_is_known_by_the_op_below_its_views_and_a_leaf_view_by_none():
    x, _ = nodes()
    families = Families(planner(("cpu.md",), (Backend.Cpu,)))
    assert families.of_group(x.index_select(0, [1, 0]).T[::2]._node) is Backend.Cpu
    assert families.of_group(x.T[1:]._node) is None
    assert families.of_group(x._node) is None


def test_the_planner_is_built_on_the_first_question_only_and_answers_are_kept():
    built = []

    def make() -> Planner:
        built.append(1)
        return planner(("cpu.md",), (Backend.Cpu,))

    _, n = nodes()
    families = Families(make)
    assert built == []
    assert families(n["select"]) is families(n["fill"]) is Backend.Cpu
    assert families(n["select"]) is Backend.Cpu and built == [1]
    assert len(families._found) == 2  # one answer per (op kind, data dtype)
