"""The op specs: one per op kind, each the one source of its op's rules for the layers above."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lazyfuel.backends.base import executor
from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.judge.workloads import program_for
from lazyfuel.layout import Layout, memory_span
from lazyfuel.ops import find, spec_for, specs
from lazyfuel.ops.common import elementwise
from lazyfuel.ops.index_select import IndexSelectParams
from lazyfuel.ops.push import PushLayout, parse_glsl
from lazyfuel.planner.program import Step
from lazyfuel.providers import default_registry
from lazyfuel.registry.signature import op_signature

SHADERS = Path(__file__).resolve().parents[2] / "shaders"


def test_every_op_kind_has_exactly_one_spec() -> None:
    assert sorted(s.kind.name for s in specs()) == sorted(k.name for k in OpKind)
    assert all(spec_for(s.kind) is s and spec_for(s.kind.name) is s for s in specs())


def test_an_unknown_op_kind_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown OpKind 'transpose'; expected one of IndexSelect"):
        spec_for("transpose")
    assert find("transpose") is None and find("") is None and find(OpKind.Gather) is spec_for("Gather")


@pytest.mark.parametrize("binding", default_registry().bindings(), ids=str)
def test_each_contract_declares_its_specs_param_fields_in_order(binding) -> None:
    """The typed params record is what every kernel of the op reads: the contracts' op-param
    fields are its fields, in its order (cost expressions and the CPU step functions read them)."""
    record = spec_for(binding.op_kind).params_type
    assert binding.contract.op_params.names == tuple(record.__dataclass_fields__)


def test_params_records_are_frozen_mappings_in_field_order() -> None:
    params, out_shape = spec_for(OpKind.IndexSelect).params([(3, 4, 5), (7,)], DType.F32, {"dim": 1})
    assert params == IndexSelectParams(outer_count=3, source_dim_size=4, n_indices=7, inner_count=5)
    assert out_shape == (3, 7, 5)
    assert tuple(params.items()) == (("outer_count", 3), ("source_dim_size", 4), ("n_indices", 7),
                                     ("inner_count", 5))
    assert params["inner_count"] == 5 and dict(params)["n_indices"] == 7
    with pytest.raises(KeyError):
        params["dim"]
    with pytest.raises(AttributeError):
        params.n_indices = 8  # type: ignore[misc]
    step = Step(None, (0, 1), tuple(params.items()), out_shape, DType.F32)  # type: ignore[arg-type]
    assert IndexSelectParams.of(step.param) == params


def test_the_signature_check_reads_the_spec() -> None:
    spec = spec_for(OpKind.MaskedFill)
    signature = op_signature("MaskedFill")
    assert signature.inputs == spec.inputs and signature.dtype_rule == spec.dtype_rule


@pytest.mark.parametrize("spec", [s for s in specs() if s.push is not None], ids=lambda s: s.name)
def test_push_layouts_are_the_shaders_blocks(spec) -> None:
    """What the Vulkan kernel packs is, member by member and type by type, what its shader reads."""
    declared = parse_glsl((SHADERS / f"{spec.shader}.comp").read_text())
    assert spec.push.members == declared.members
    assert spec.push.format == declared.format and spec.push.base_slot == declared.base_slot


def test_push_values_follow_the_block_and_refuse_strays() -> None:
    layout = PushLayout.of("uint64_t src", "uint64_t base", "uvec4 fill", "uint shape[2]")
    assert layout.format == "<QQ4III" and layout.base_slot == 1
    assert layout.values(shape=(5, 6), fill=(1, 2, 3, 4), base=0, src=9) == [9, 0, 1, 2, 3, 4, 5, 6]
    with pytest.raises(ValueError, match=r"missing \['fill'\], unknown \['fil'\]"):
        layout.values(src=1, base=0, fil=(1, 2, 3, 4), shape=(1, 1))
    with pytest.raises(ValueError, match=r"push constant shape takes 2 value\(s\), got 3"):
        layout.values(src=1, base=0, fill=(1, 2, 3, 4), shape=(1, 1, 1))
    with pytest.raises(ValueError, match="no layout"):
        parse_glsl("void main() {}")


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
