"""The op specs: one per op kind, each the one source of its op's rules for the layers above."""

from __future__ import annotations

import pytest

from lazyfuel.contracts.model import OpKind
from lazyfuel.ops import spec_for
from lazyfuel.providers import default_registry
from lazyfuel.registry.signature import op_signature


@pytest.mark.parametrize("binding", default_registry().bindings(), ids=str)
def test_each_contract_declares_its_specs_param_fields_in_order(binding) -> None:
    """The typed params record is what every kernel of the op reads: the contracts' op-param
    fields are its fields, in its order (cost expressions and the CPU step functions read them)."""
    record = spec_for(binding.op_kind).params_type
    assert binding.contract.op_params.names == tuple(record.__dataclass_fields__)


def test_the_signature_check_reads_the_spec() -> None:
    spec = spec_for(OpKind.MaskedFill)
    signature = op_signature("MaskedFill")
    assert signature.inputs == spec.inputs and signature.dtype_rule == spec.dtype_rule
