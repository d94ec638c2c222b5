"""`OpSpec`: everything the layers above know about one op kind, in one object.

An op's spec owns its argument rules (the planner's step params and output shape from the input
shapes and the chain node's attributes, with the checks of those attributes), its kernels' call
signature (inputs in call order, the output's dtype rule), its typed step params (a frozen
`KernelParams` record: field order and types are what the kernels read), the numpy reference,
the judge's workloads and the audit's cases. The planner, the judge, the audit, fusion and the
registry's signature check look an op kind's spec up (`lazyfuel.ops.spec_for`) instead of keeping
tables of their own; each op module (`ops/index_select.py` ...) defines one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from lazyfuel.contracts.model import DtypeRule, KernelContract, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.ops.push import PushLayout

Shape = tuple[int, ...]
Inputs = list[np.ndarray]
Attrs = dict[str, Any]


class KernelParams(Mapping[str, Any]):
    """Base of the typed step params: subclasses are frozen dataclasses whose fields, in order, are
    the op-param fields of the op's contracts. A record reads as a mapping too (`params["dim"]`,
    `dict(params)`), which is how `Step.params`, cost expressions and the CPU step functions
    (`**step.param`) take it."""

    def __getitem__(self, name: str) -> Any:
        if name not in self._names():
            raise KeyError(name)
        return getattr(self, name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    @classmethod
    @cache
    def _names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]

    @classmethod
    def of(cls, params: Mapping[str, Any]) -> KernelParams:
        """The record of a step's params mapping (KeyError naming a missing field)."""
        return cls(*[params[name] for name in cls._names()])


@dataclass(frozen=True)
class Case:
    """An audit case: data of `shape`, selecting (or transforming) along `dim` with `n_indices`
    indices and the op attributes `attrs` (an FFT's `norm`, `n`), the source seen through `view`."""

    shape: Shape
    dim: int = 0
    n_indices: int | None = None
    view: str = "contiguous"
    attrs: tuple[tuple[str, Any], ...] = ()

    def __str__(self) -> str:
        idx = "" if self.n_indices is None else f", {self.n_indices} indices"
        extra = "".join(f", {k} {v}" for k, v in self.attrs)
        return f"shape {self.shape}, dim {self.dim}{idx}{extra}, {self.view} source"


@dataclass(frozen=True)
class Timed:
    """One judge workload before it becomes a Program: the inputs and attributes of its first step,
    whether later steps read the inputs again (`reread`: an op whose output cannot feed it), and
    the view of input 0's memory span that step 0 reads (`view`, None: the whole input)."""

    inputs: Inputs
    attrs: Attrs
    reread: bool = False
    view: Layout | None = None


# (dtypes of the binding, shape, dim, n_indices, rng) -> fresh inputs and the op's attributes
InputMaker = Callable[[tuple[DType, ...], Shape, int, int, np.random.Generator], tuple[Inputs, Attrs]]
# (the binding's contract, its dtypes, about n elements, rng) -> the workloads the judge times
Ladder = Callable[[KernelContract, tuple[DType, ...], int, np.random.Generator], tuple[Timed, ...]]
# (result, reference, the output dtype, the contract, attrs) -> the first broken promise or None
Compare = Callable[[np.ndarray, np.ndarray, DType, KernelContract, Attrs], Any]
# (inputs, attrs, pieces) -> the pieces' (inputs, attrs) and the axis their results join along
Chunking = Callable[[Inputs, Attrs, int], tuple[list[tuple[Inputs, Attrs]], int]]
# (the chain node's attrs, the output axis cut, its inputs' shapes) -> the axis each input is cut
# along (None: needed whole), or None when the op does not keep the rows it is cut along
CutRule = Callable[[Mapping[str, Any], int, list[Any]], "list[int | None] | None"]
# (the chain node's attrs, its inputs' shapes) -> the output shape (no dtype needed)
ShapeRule = Callable[[Mapping[str, Any], list[Any]], Shape]
# (the step's params, argument k, the output's itemsize) -> whether the kernel reads argument k once,
# in order, in long runs (a stream: planner.streams)
StreamRule = Callable[[Mapping[str, Any], int, int], bool]
# (input shapes, dtype of input 0, attrs) -> the step's params and its output shape
ParamRule = Callable[[Sequence[Sequence[int]], DType, Mapping[str, Any]], tuple[KernelParams, Shape]]


@dataclass(frozen=True)
class OpSpec:
    """One op kind; see the module docstring.

    `inputs` are the kernels' inputs in call order, each with the dtypes a kernel reads there (None:
    any); `blockwise`: output block b of the op reads block b of each input (fusion emits it as is;
    the selects map blocks through their indices instead). `cut` and `shape` tell `graph.split`
    how a block of the op is run in halves when the device is out of memory (None: it is not
    split; each output element must come from its own input rows). `cases` run for every binding,
    `view_cases` where the binding's caps accept the view. `shader` names the op's GLSL compute
    shader (`shaders/<shader>.comp`) and `push` its push-constant block, which the Vulkan kernel
    packs (None: no shader of its own). `streams` says which arguments a step reads as a stream
    (`planner.streams`; None: none).
    """

    kind: OpKind
    name: str
    inputs: tuple[tuple[str, frozenset[DType] | None], ...]
    dtype_rule: DtypeRule
    params_type: type[KernelParams]
    plan: ParamRule | None
    reference: Callable[[Inputs, Attrs], np.ndarray]
    make_inputs: InputMaker
    ladder: Ladder
    cases: tuple[Case, ...]
    view_cases: tuple[Case, ...]
    compare: Compare
    chunking: Chunking
    blockwise: bool = False
    cut: CutRule | None = None
    shape: ShapeRule | None = None
    shader: str = ""
    push: PushLayout | None = None
    streams: StreamRule | None = None

    def params(self, shapes: Sequence[Sequence[int]], dtype: DType,
               attrs: Mapping[str, Any]) -> tuple[KernelParams, Shape]:
        """The step's typed params and output shape for inputs of `shapes` (input 0 of `dtype`) and
        the chain node's `attrs`; the op's errors for attributes it does not take."""
        if self.plan is None:
            raise TypeError(f"{self.kind} takes its params from a layout, not from shapes")
        return self.plan(shapes, dtype, attrs)


_SPECS: dict[OpKind, OpSpec] = {}


def register(spec: OpSpec) -> OpSpec:
    """Add `spec` to the registry of op specs (one per op kind; ValueError for a second)."""
    if spec.kind in _SPECS:
        raise ValueError(f"op kind {spec.kind} already has a spec ({_SPECS[spec.kind].name})")
    _SPECS[spec.kind] = spec
    return spec


def spec_for(kind: OpKind | str) -> OpSpec:
    """The spec of op kind `kind` (a member or its name): ValueError naming the op kinds for an
    unknown name, KeyError naming those with a spec for a kind without one."""
    op_kind = OpKind.parse(kind)
    found = _SPECS.get(op_kind)
    if found is None:
        raise KeyError(f"no op spec for op kind {op_kind}; known: {' '.join(k.name for k in _SPECS)}")
    return found


def find(kind: OpKind | str) -> OpSpec | None:
    """The spec of `kind`, or None where it names no op kind with a spec (a view, a source)."""
    return _SPECS.get(kind if isinstance(kind, OpKind) else OpKind.__members__.get(kind))


def specs() -> tuple[OpSpec, ...]:
    """Every registered spec, in registration order."""
    return tuple(_SPECS.values())
