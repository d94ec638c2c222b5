"""Typed, immutable kernel contracts: what `parse` builds from an FKC document.

Every entity carries the `Location` it came from, so later passes (registry, planner) can say
where a problem was declared. Field names match the keys of the document.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout

if TYPE_CHECKING:
    from lazyfuel.contracts.expr import Expr


class ContractError(ValueError):
    """A contract document is malformed. `.path`, `.line` (1-based) and `.key` say where."""

    def __init__(self, message: str, path: str = "<string>", line: int = 0, key: str = "") -> None:
        self.path, self.line, self.key, self.reason = path, line, key, message
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {key}: {message}" if key else f"{where}: {message}")


@dataclass(frozen=True)
class Location:
    """Where something was declared: file, 1-based line, key."""

    path: str = "<string>"
    line: int = 0
    key: str = ""

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"

    def error(self, message: str, key: str | None = None) -> ContractError:
        """A ContractError at this location (optionally for another key on the same line)."""
        return ContractError(message, self.path, self.line, self.key if key is None else key)


class _Named(enum.Enum):
    """An enum whose members are written by name in documents, parsed with `parse`."""

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return self.name

    @classmethod
    def parse(cls, name: object) -> _Named:
        """The member named `name` (or `name` itself); ValueError listing the accepted names."""
        if isinstance(name, cls):
            return name
        for member in cls:
            if member.name == name or member.value == name:
                return member
        accepted = " ".join(m.value for m in cls)
        raise ValueError(f"unknown {cls.__name__} {name!r}; expected one of {accepted}")


class _Open(_Named):
    """A named enum that code outside this module may extend: an op module declares its op kind,
    a backend package its backend (`add`), so neither needs a line here."""

    @classmethod
    def add(cls, name: str) -> _Open:
        """The member `name`, added if it is new (an op module outside this list declares its kind
        so: `KIND = OpKind.add("Flip")`; a backend package its name: `Backend.add("Metal")`);
        ValueError for a name that is not a public identifier. Afterwards `cls.Name`,
        `cls.parse("Name")`, iteration and pickling know it."""
        if not name.isidentifier() or name.startswith("_"):
            raise ValueError(f"a {cls.__name__} member is named by a public identifier, got {name!r}")
        if name in cls.__members__:
            return cls[name]
        member = object.__new__(cls)
        member._name_, member._value_ = name, name
        member._sort_order_ = len(cls._member_names_)
        member.__init__()  # type: ignore[misc]
        cls._member_map_[name] = member
        cls._member_names_.append(name)
        cls._value2member_map_[name] = member
        type.__setattr__(cls, name, member)
        return member


class OpKind(_Open):
    IndexSelect = "IndexSelect"
    Gather = "Gather"
    MaskedFill = "MaskedFill"
    Contiguize = "Contiguize"
    Fft = "Fft"
    Ifft = "Ifft"
    Rfft = "Rfft"
    Irfft = "Irfft"
    SelectFill = "SelectFill"  # index_select, then masked_fill of its result: planned, never built


class Backend(_Open):
    Vulkan = "Vulkan"
    Cpu = "Cpu"
    OpenCL = "OpenCL"
    Cuda = "Cuda"


class Requirement(_Named):
    required = "required"
    optional = "optional"


class Acceptance(_Named):
    rejected = "rejected"
    accepted = "accepted"


class AwkwardLayoutStrategy(_Named):
    requires_contiguous = "requires_contiguous"
    native_strided = "native_strided"


class Provenance(_Named):
    judge_measured = "judge_measured"
    declared = "declared"


class Determinism(_Named):
    bitwise = "bitwise"
    run_to_run = "run_to_run"
    none = "none"


@dataclass(frozen=True)
class Provider:
    """The front matter: who ships the kernels and how their symbols resolve."""

    name: str
    backend: Backend
    kernel_source: str
    link_registry: str
    revision_base: str
    fkc_version: int = 1
    loc: Location = field(default_factory=Location, compare=False)
    key_lines: tuple[tuple[str, int], ...] = field(default=(), compare=False, repr=False)

    def loc_of(self, key: str) -> Location:
        """Where `key` of the provider was written (the `provider:` line if unknown)."""
        return Location(self.loc.path, dict(self.key_lines).get(key, self.loc.line), key)


@dataclass(frozen=True)
class LayoutCaps:
    """Which awkward layout properties an input accepts."""

    contiguous: Requirement
    strided: Acceptance
    broadcast_stride0: Acceptance
    start_offset: Acceptance
    reverse_strides: Acceptance

    def violation(self, layout: Layout) -> str | None:
        """The first cap `layout` breaks, as `"<property>: rejected"`, or None if accepted."""
        props = layout.properties()
        if self.contiguous is Requirement.required and not props["contiguous"]:
            awkward = [k for k in _AWKWARD if props[k]]
            return f"contiguous: required (input is {' + '.join(awkward) or 'not contiguous'})"
        for key in _AWKWARD:
            if props[key] and getattr(self, key) is Acceptance.rejected:
                return f"{key}: rejected"
        return None


_AWKWARD = ("strided", "broadcast_stride0", "start_offset", "reverse_strides")


@dataclass(frozen=True)
class InputSpec:
    name: str
    dtypes: tuple[DType, ...]
    layout: LayoutCaps
    rank: int | None  # None = any
    shape_constraint: str = ""
    loc: Location = field(default_factory=Location, compare=False)


@dataclass(frozen=True)
class FieldSpec:
    name: str
    kind: str
    note: str = ""
    constraint: str = ""


@dataclass(frozen=True)
class OpParams:
    variant: str
    fields: tuple[FieldSpec, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)


# Output dtype rules by name: each maps the named input's dtype to the output's (None: no result).
# `passthrough` keeps it; `complex_of` / `real_of` give the complex / real type of the same precision.
_COMPLEX = {DType.F32: DType.C64, DType.F64: DType.C128, DType.C64: DType.C64, DType.C128: DType.C128}
_REAL = {DType.C64: DType.F32, DType.C128: DType.F64, DType.F32: DType.F32, DType.F64: DType.F64}
DTYPE_RULES: dict[str, Callable[[DType], DType | None]] = {
    "passthrough": lambda dtype: dtype,
    "complex_of": _COMPLEX.get,
    "real_of": _REAL.get,
}


@dataclass(frozen=True)
class DtypeRule:
    """`<kind>(<input>)`: the output dtype is `DTYPE_RULES[kind]` of that input's dtype.

    `passthrough(x)` keeps x's dtype; `complex_of(x)` is the complex type of x's precision (F32 → C64,
    F64 → C128, complex types unchanged); `real_of(x)` the real one (C64 → F32, C128 → F64).
    """

    input: str
    kind: str = "passthrough"

    def __str__(self) -> str:
        return f"{self.kind}({self.input})"

    def apply(self, dtype: DType) -> DType:
        """The output dtype for an input of `dtype`; ValueError naming the dtypes the rule maps."""
        found = DTYPE_RULES[self.kind](dtype)
        if found is None:
            mapped = " ".join(d.name for d in DType if DTYPE_RULES[self.kind](d) is not None)
            raise ValueError(f"{self} has no result for {self.input} of dtype {dtype.name}; "
                             f"{self.kind} maps {mapped}")
        return found


@dataclass(frozen=True)
class ShapeRule:
    """`from_params(a, b, …)` or `same_as(<input>)`."""

    kind: str  # "from_params" | "same_as"
    args: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.kind}({', '.join(self.args)})"


@dataclass(frozen=True)
class OutputSpec:
    name: str
    dtype_rule: DtypeRule
    shape_rule: ShapeRule
    layout_guarantee: str
    aliasing: str


@dataclass(frozen=True)
class FastPath:
    when: str
    cls: str  # the document's key is `class`


@dataclass(frozen=True)
class Caps:
    """What a kernel can take. The optional `device_kinds` and `misfit` are plan conditions: the
    planner considers the binding only on a device of a listed kind (empty: any device) and where
    the `misfit` expression over the op params is 0 (None: always)."""

    awkward_layout_strategy: AwkwardLayoutStrategy
    fast_paths: tuple[FastPath, ...]
    in_place: bool
    alignment_bytes: int
    access_granularity_bits: int
    device_kinds: tuple[str, ...] = ()
    misfit: Expr | None = None


@dataclass(frozen=True)
class Cost:
    provenance: Provenance
    cls: str  # the document's key is `class`
    flops: Expr
    bytes_moved: Expr


@dataclass(frozen=True)
class Precision:
    bit_stable_on_same_hardware: bool
    max_ulp: float
    max_relative: float
    max_absolute: float
    audited: bool
    notes: str = ""


@dataclass(frozen=True)
class KernelContract:
    """One ```fkc block: a kernel, what it accepts, returns, costs and how exact it is."""

    kernel: str
    op_kind: OpKind
    blurb: str
    backend: Backend
    kernel_source: str
    entry_point: str
    kernel_revision_hash: str | None  # None = `auto`
    inputs: tuple[InputSpec, ...]
    op_params: OpParams
    outputs: tuple[OutputSpec, ...]
    caps: Caps
    cost: Cost
    precision: Precision
    determinism: Determinism
    provider: Provider
    doc: str = ""  # the markdown prose of this kernel's section
    loc: Location = field(default_factory=Location, compare=False)
    key_lines: tuple[tuple[str, int], ...] = field(default=(), compare=False, repr=False)

    def loc_of(self, key: str) -> Location:
        """Where top-level `key` of this block was written (the `kernel:` line if unknown)."""
        return Location(self.loc.path, dict(self.key_lines).get(key, self.loc.line), key)

    @property
    def fanned_input(self) -> InputSpec | None:
        """The first input with several dtypes: bindings fan over it (None if all are fixed)."""
        return next((i for i in self.inputs if len(i.dtypes) > 1), None)

    def input(self, name: str) -> InputSpec:
        """The input called `name` (KeyError if none)."""
        for spec in self.inputs:
            if spec.name == name:
                return spec
        raise KeyError(name)


@dataclass(frozen=True)
class ContractDocument:
    """A whole FKC document: its provider, its prose, and its kernels in order.

    `prose_parts` is the prose split around the ```fkc blocks (one more part than there are
    contracts: before the first block, between blocks, after the last); each part is whole lines,
    each ending in a newline, so `fmt` can put every block back where it was. `prose` is their join.
    """

    path: str
    provider: Provider
    prose: str
    contracts: tuple[KernelContract, ...]
    prose_parts: tuple[str, ...] = ()
