"""What a kernel computes, as the backend that ships it declares: the check that keeps a contract
from changing an op's meaning.

A contract document says which symbol runs an op; the symbol resolves to a `KernelRef`, and the
backend that built that KernelRef declares, in its `signature`, what the code computes: the op
kind, its inputs in call order (and the dtypes it reads at each, where fixed) and the rule giving
its output's dtype. A binding links only to a kernel whose signature matches its own contract,
so a document cannot bind `Fft` to an inverse transform, nor IndexSelect to the gather kernel.
`op_signature(kind)` is the signature of the op kind as the planner calls it (its `OpSpec`: args
in this order); backends declare their kernels with it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from lazyfuel.contracts.model import DtypeRule, KernelContract, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.ops import specs


@dataclass(frozen=True)
class KernelSignature:
    """An op kind, its inputs `(name, dtypes it reads there or None for any)` in call order, and
    the output's dtype rule."""

    op_kind: OpKind
    inputs: tuple[tuple[str, frozenset[DType] | None], ...]
    dtype_rule: DtypeRule

    def __str__(self) -> str:
        args = ", ".join(name if dtypes is None else f"{name}: {'/'.join(sorted(d.name for d in dtypes))}"
                         for name, dtypes in self.inputs)
        return f"{self.op_kind}({args}) -> {self.dtype_rule}"

    def reading(self, name: str, dtypes: frozenset[DType]) -> KernelSignature:
        """This signature with input `name` read as `dtypes` (a kernel taking more index dtypes)."""
        if name not in (n for n, _ in self.inputs):
            raise KeyError(f"{self} has no input {name!r}")
        return replace(self, inputs=tuple((n, dtypes if n == name else d) for n, d in self.inputs))

    def mismatch(self, contract: KernelContract) -> str | None:
        """How `contract` declares something other than this kernel computes, or None if it fits."""
        if contract.op_kind is not self.op_kind:
            return f"the kernel computes {self.op_kind}, the contract declares op_kind {contract.op_kind}"
        names = tuple(spec.name for spec in contract.inputs)
        want = tuple(name for name, _ in self.inputs)
        if names != want:
            return (f"the kernel takes inputs ({', '.join(want)}), the contract declares "
                    f"({', '.join(names)})")
        for spec, (name, dtypes) in zip(contract.inputs, self.inputs):
            extra = [d.name for d in spec.dtypes if dtypes is not None and d not in dtypes]
            if extra:
                return (f"the kernel reads {name} as {'/'.join(sorted(d.name for d in dtypes))}, "
                        f"the contract declares {name} dtypes {' '.join(extra)}")
        if len(contract.outputs) != 1:
            return f"the kernel has one output, the contract declares {len(contract.outputs)}"
        rule = contract.outputs[0].dtype_rule
        if (rule.kind, rule.input) != (self.dtype_rule.kind, self.dtype_rule.input):
            return f"the kernel's output is {self.dtype_rule}, the contract declares dtype_rule {rule}"
        return None


# each op kind's signature: its op spec's inputs and dtype rule (`lazyfuel.ops`)
OP_SIGNATURES: dict[OpKind, KernelSignature] = {
    spec.kind: KernelSignature(spec.kind, spec.inputs, spec.dtype_rule) for spec in specs()}


def op_signature(op_kind: OpKind | str) -> KernelSignature:
    """The signature of `op_kind` as the planner calls its kernels (args in this order); ValueError
    naming the op kinds for an unknown name."""
    return OP_SIGNATURES[OpKind.parse(op_kind)]
