"""Planner: binding choice per backend, inserted Contiguize steps with their caps, caching."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from lazyfuel.backends.base import executor
from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.planner import Chain, OpNode, Planner, describe_program
from lazyfuel.planner.chain import encode_key
from lazyfuel.providers import CONTRACTS_DIR, available_backends, default_registry, register_builtin_providers
from lazyfuel.registry import NoBindingError, Registry


def _chain_select_fill(value: float = -1.0) -> Chain:
    """in0 (data), in1 (indices), in2 (mask): index_select(in0, 0, in1) then masked_fill(., in2)."""
    return Chain(3, (OpNode("IndexSelect", (0, 1), (("dim", 0),)),
                     OpNode("MaskedFill", (3, 2), (("value", value),))), (4,))


def _inputs(rng: np.random.Generator):
    base = rng.standard_normal((6, 5)).astype(np.float32)
    data = base.T  # (5, 6), strided
    idx = np.array([4, 0, 0, 2], np.uint32)
    mask = rng.random((4, 6)) < 0.5
    return data, idx, mask


@cache
def contiguous_only() -> Registry:
    """The shipped documents without the strided-reading kernels: Vulkan selects need Contiguize."""
    register_builtin_providers()
    found = Registry()
    for name in ("cpu.md", "vulkan_select.md", "vulkan.md"):
        found.load(CONTRACTS_DIR / name)
    return found


def _plan(backend: Backend, arrays, registry: Registry | None = None) -> object:
    planner = Planner(registry or contiguous_only(), [backend])
    dtypes = [DType.from_numpy(a.dtype) for a in arrays]
    return planner, planner.plan(_chain_select_fill(), dtypes, [Layout.of(a) for a in arrays])


def test_vulkan_plan_contiguizes_a_transposed_source_and_names_the_cap() -> None:
    rng = np.random.default_rng(1)
    _, program = _plan(Backend.Vulkan, _inputs(rng))
    kinds = [s.binding.op_kind for s in program.steps]
    assert kinds == [OpKind.Contiguize, OpKind.IndexSelect, OpKind.MaskedFill]
    assert program.steps[0].reason == "index_select input source: contiguous: required (input is strided)"
    assert program.steps[0].param == {"shape": (5, 6), "strides": (1, 5), "offset": 0}
    assert program.steps[1].args == (3, 1)
    assert program.steps[1].param == {"outer_count": 1, "source_dim_size": 5, "n_indices": 4,
                                      "inner_count": 6}
    assert program.steps[2].param == {"fill_bytes": np.float32(-1.0).tobytes()}
    assert program.outputs == (5,)
    text = describe_program(program)
    assert "inserted: index_select input source: contiguous: required (input is strided)" in text
    assert program.cost == pytest.approx(sum(s.cost for s in program.steps)) and program.cost > 0


def test_cpu_plan_reads_the_strided_source_natively() -> None:
    rng = np.random.default_rng(2)
    _, program = _plan(Backend.Cpu, _inputs(rng))
    assert [s.binding.op_kind for s in program.steps] == [OpKind.IndexSelect, OpKind.MaskedFill]


@pytest.mark.parametrize("backend", [Backend.Cpu, Backend.Vulkan])
def test_planned_program_runs_bit_exact(backend: Backend) -> None:
    if backend not in available_backends():
        pytest.skip(f"{backend} is not usable on this machine")
    rng = np.random.default_rng(3)
    arrays = _inputs(rng)
    _, program = _plan(backend, arrays)
    (out,) = executor(backend).run(program, list(arrays))
    expected = np.where(arrays[2], np.float32(-1.0), np.take(arrays[0], arrays[1], axis=0))
    assert out.tobytes() == expected.tobytes()


def test_views_inside_a_chain_become_contiguize_steps() -> None:
    rng = np.random.default_rng(4)
    data = rng.standard_normal((8, 3)).astype(np.float32)
    idx = np.array([2, 0], np.uint32)
    chain = Chain(2, (OpNode("IndexSelect", (0, 1), (("dim", 1),)),          # (8, 2)
                      OpNode("getitem", (2,), (("key", encode_key((slice(None, None, -2),))),)),
                      OpNode("transpose", (3,), ()),                              # (2, 4)
                      OpNode("Contiguize", (4,), ())), (5,))
    for backend in (Backend.Cpu, Backend.Vulkan):
        if backend not in available_backends():
            continue
        program = Planner(default_registry(), [backend]).plan(
            chain, [DType.F32, DType.U32], [Layout.of(data), Layout.of(idx)])
        assert program.steps[-1].binding.op_kind is OpKind.Contiguize
        assert program.steps[-1].param == {"shape": (2, 4), "strides": (1, -4), "offset": 14}
        (out,) = executor(backend).run(program, [data, idx])
        expected = np.take(data, idx, axis=1)[::-2].T
        assert out.tobytes() == np.ascontiguousarray(expected).tobytes()


def test_auto_picks_the_cheaper_backend_and_caches_plans() -> None:
    rng = np.random.default_rng(5)
    arrays = _inputs(rng)
    planner = Planner(default_registry(), [Backend.Vulkan, Backend.Cpu])
    dtypes = [DType.from_numpy(a.dtype) for a in arrays]
    layouts = [Layout.of(a) for a in arrays]
    first = planner.plan(_chain_select_fill(), dtypes, layouts)
    assert planner.plan(_chain_select_fill(), dtypes, layouts) is first
    costs = {b: Planner(default_registry(), [b]).plan(_chain_select_fill(), dtypes, layouts).cost
             for b in (Backend.Vulkan, Backend.Cpu)}
    assert first.cost == min(costs.values())


def test_the_plan_cache_keeps_the_most_recently_used_plans() -> None:
    planner = Planner(default_registry(), [Backend.Cpu], cache_size=2)
    chain = Chain(2, (OpNode("IndexSelect", (0, 1), (("dim", 0),)),), (2,))

    def plan(n: int):  # one signature per index count
        return planner.plan(chain, [DType.F32, DType.U32], [Layout.contiguous((8,)), Layout.contiguous((n,))])

    first, second = plan(1), plan(2)
    assert plan(1) is first  # a hit; 1 is now the most recent
    plan(3)  # evicts 2, the least recently used
    assert plan(1) is first
    again = plan(2)
    assert again is not second and again == second  # planned anew, the same program


def test_no_backend_can_run_says_why() -> None:
    chain = Chain(2, (OpNode("IndexSelect", (0, 1), (("dim", 0),)),), (2,))
    planner = Planner(default_registry(), [Backend.Vulkan])
    with pytest.raises(NoBindingError) as err:
        planner.plan(chain, [DType.F32, DType.F32], [Layout.contiguous((4,)), Layout.contiguous((2,))])
    assert "Vulkan: no IndexSelect binding for inputs [F32,F32]" in str(err.value)
