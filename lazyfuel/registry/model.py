"""What the registry holds: kernel references, binding keys and bindings.

A `KernelRef` is what a link registry resolves a symbol to: the backend's own handle on runnable
code, the bytes of that code (hashed into the revision) and the backend's declaration of what the
code computes (`signature`). A `Binding` is one fanned dtype key of a contract, linked to its
KernelRef, and says where it came from (`origin`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lazyfuel.contracts.model import Backend, KernelContract, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.registry.signature import KernelSignature

DEFAULT_ORIGIN = "default"  # the origin of bindings from the documents the project ships


@dataclass(frozen=True, eq=False)
class KernelRef:
    """Runnable code a symbol resolves to.

    `impl` is private to the backend that runs it (a numpy function for Cpu, a shader wrapper for
    Vulkan). `code` returns the bytes of the code (SPIR-V, source text) for the revision hash; it
    is a callable so that building a link registry reads no files until a hash is needed.
    Identity is the object: several symbols may resolve to the same KernelRef. `signature` is
    what the code computes (`registry.signature`): a binding links only to a kernel whose
    signature matches its contract; a KernelRef without one cannot be linked.
    """

    name: str
    backend: Backend
    impl: Any
    code: Callable[[], bytes] = field(repr=False, default=lambda: b"")
    signature: KernelSignature | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        return f"KernelRef({self.name})"


@dataclass(frozen=True)
class BindingKey:
    """`(op_kind, [input dtypes…, output dtype], backend)` plus the kernel_source tag."""

    op_kind: OpKind
    dtypes: tuple[DType, ...]
    backend: Backend
    kernel_source: str

    def __str__(self) -> str:
        dts = ",".join(d.name for d in self.dtypes)
        return f"({self.op_kind.name},[{dts}],{self.backend.name}) {self.kernel_source}"


@dataclass(frozen=True)
class Binding:
    """One registered kernel for one dtype key."""

    key: BindingKey
    symbol: str
    kernel_ref: KernelRef
    revision_hash: str
    contract: KernelContract
    cost_fn: Callable[[dict[str, Any]], float] | None = field(default=None, compare=False, repr=False)
    origin: str = field(default="", compare=False)  # DEFAULT_ORIGIN, or the document's path

    @property
    def is_default(self) -> bool:
        """Whether the binding comes from a document the project ships."""
        return self.origin == DEFAULT_ORIGIN

    @property
    def op_kind(self) -> OpKind:
        return self.key.op_kind

    @property
    def dtypes(self) -> tuple[DType, ...]:
        return self.key.dtypes

    @property
    def backend(self) -> Backend:
        return self.key.backend

    @property
    def kernel_source(self) -> str:
        return self.key.kernel_source

    def __str__(self) -> str:
        return f"{self.key} -> {self.symbol}"
