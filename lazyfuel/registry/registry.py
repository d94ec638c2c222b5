"""The binding registry: contracts fanned into per-dtype bindings, linked, hashed and looked up.

`Registry.add_document` turns each kernel contract into one `Binding` per dtype of its fanned
input (the first input listing several dtypes; the first input if none does), keyed
`(op_kind, [input dtypes…, output dtype], backend) + kernel_source`. Each binding's symbol,
`<entry_point>_<suffix>`, resolves through the link registry named in the front matter. A document
is checked whole before any of its bindings is added, so a failed load changes nothing.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from lazyfuel.contracts import parse_document, parse_file
from lazyfuel.contracts.model import Backend, ContractDocument, KernelContract, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.registry.cost import fill_unset_cost_for_backend, initial_cost
from lazyfuel.registry.links import link_registry, link_registry_names
from lazyfuel.registry.model import Binding, BindingKey, KernelRef


class NoBindingError(LookupError):
    """No binding fits a request. `.near_misses` lists `(binding, first failing check)`."""

    def __init__(self, message: str, near_misses: list[tuple[Binding, str]]) -> None:
        super().__init__(message)
        self.near_misses = near_misses


class Registry:
    """Bindings by key, in registration order. Thread-safe; `lf.registry()` is the default one."""

    def __init__(self) -> None:
        self._bindings: dict[BindingKey, Binding] = {}
        self._by_kind: dict[OpKind, tuple[Binding, ...]] = {}  # of `_bindings`, made with it
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._bindings)

    def copy(self) -> Registry:
        """A new registry holding this one's bindings; loading into it leaves this one as it is."""
        other = Registry()
        with self._lock:
            other._bindings, other._by_kind = dict(self._bindings), self._by_kind
        return other

    def bindings(self) -> list[Binding]:
        """Every binding, in registration order."""
        with self._lock:
            return list(self._bindings.values())

    def of_kind(self, op_kind: OpKind | str) -> tuple[Binding, ...]:
        """The bindings of `op_kind` (or the op kind of that name; none for a name no binding has),
        in registration order: what planning a node looks through (hundreds of bindings in all, a
        few of one kind; indexed once per change of the registry)."""
        by_kind = self._by_kind
        if isinstance(op_kind, str) and not isinstance(op_kind, OpKind):
            return next((found for kind, found in by_kind.items() if kind.name == op_kind), ())
        return by_kind.get(op_kind, ())

    def load(self, path_or_text: str | Path, origin: str | None = None) -> list[Binding]:
        """Parse a contract document (a file path or its text) and add its bindings.

        A file is refused before it is read if it is too long (`contracts.parse.read_document`).
        `origin` is where the bindings say they came from (default: the document's path, or
        `<string>` for text); the default registry loads the shipped documents as `"default"`.
        """
        path = Path(path_or_text) if isinstance(path_or_text, Path) else None
        if path is None and isinstance(path_or_text, str) and "\n" not in path_or_text:
            candidate = Path(path_or_text)
            path = candidate if candidate.is_file() else None
        if path is not None:
            return self.add_document(parse_file(path), origin)
        return self.add_document(parse_document(str(path_or_text)), origin)

    def add_document(self, doc: ContractDocument, origin: str | None = None) -> list[Binding]:
        """Fan, link and hash every contract of `doc`; add all or none. Raises ContractError.

        Bindings from anywhere but the shipped documents (`origin` other than "default") never
        compete with a default binding: one whose op kind, dtypes and backend a default binding
        already serves is refused, naming both (docs/contracts.md, "Loaded documents").
        """
        origin = origin or doc.path
        fanned = [dataclasses.replace(b, origin=origin)
                  for contract in doc.contracts for b in fan_out(contract)]
        added = []
        with self._lock:
            seen: dict[BindingKey, Binding] = dict(self._bindings)
            served = {_served(b): b for b in self._bindings.values() if b.is_default}
            for binding in fanned:
                other = seen.get(binding.key)
                if other is not None:
                    if binding.key in self._bindings and _same(other, binding):
                        added.append(other)  # the same contract loaded again: a no-op
                        continue
                    raise binding.contract.loc.error(
                        f"duplicate binding {binding.key}: already declared by kernel "
                        f"{other.contract.kernel!r} at {other.contract.loc}", key="kernel")
                default = served.get(_served(binding))
                if default is not None and not binding.is_default:
                    raise binding.contract.loc.error(
                        f"binding {binding.key} would compete with the default binding {default.key} "
                        f"(kernel {default.contract.kernel!r} at {default.contract.loc}); a loaded "
                        "document may add op kinds, dtypes or backends the shipped documents do not "
                        "serve, never run in their place (load it into its own lf.Registry() to check "
                        "or audit it)", key="kernel")
                seen[binding.key] = binding
                added.append(binding)
            by_kind: dict[OpKind, list[Binding]] = {}
            for binding in seen.values():
                by_kind.setdefault(binding.op_kind, []).append(binding)
            self._bindings = seen
            self._by_kind = {kind: tuple(found) for kind, found in by_kind.items()}
        return added

    def candidates(self, op_kind: OpKind | str, dtypes: Sequence[DType | str]) -> list[Binding]:
        """Every binding for `op_kind` whose dtype key is `dtypes`, on any backend."""
        op_kind, dtypes = OpKind.parse(op_kind), tuple(DType.parse(d) for d in dtypes)
        return [b for b in self.of_kind(op_kind) if b.dtypes == dtypes]

    def lookup(self, op_kind: OpKind | str, dtypes: Sequence[DType | str],
               backend: Backend | str | None = None,
               layouts: Sequence[Layout] | None = None) -> Binding:
        """The first binding that fits, in registration order, else NoBindingError.

        `dtypes` is `[input dtypes…, output dtype]`; `layouts`, if given, one per input: a binding
        whose caps reject an input's layout or rank does not fit. The error lists every binding of
        the same op kind with the first check it fails.
        """
        op_kind = OpKind.parse(op_kind)
        dtypes = tuple(DType.parse(d) for d in dtypes)
        backend = None if backend is None else Backend.parse(backend)
        misses: list[tuple[Binding, str]] = []
        for binding in self.of_kind(op_kind):
            reason = first_failing_check(binding, dtypes, backend, layouts)
            if reason is None:
                return binding
            misses.append((binding, reason))
        want = f"({op_kind},[{','.join(d.name for d in dtypes)}],{backend or 'any backend'})"
        if not misses:
            kinds = sorted({b.op_kind.name for b in self.bindings()})
            raise NoBindingError(f"no binding for {want}: no kernel has op_kind {op_kind}; "
                                 f"registered op kinds: {' '.join(kinds) or 'none'}", [])
        lines = "\n".join(f"  {b.key} ({b.symbol}): {reason}" for b, reason in misses)
        raise NoBindingError(f"no binding for {want}; near misses:\n{lines}", misses)


def _served(binding: Binding) -> tuple[OpKind, tuple[DType, ...], Backend]:
    """What a binding serves, whichever kernel_source it has: its op kind, dtypes and backend."""
    return binding.op_kind, binding.dtypes, binding.backend


def _same(a: Binding, b: Binding) -> bool:
    """The same contract linked to the same kernel: loading it again is harmless."""
    return a.contract == b.contract and a.kernel_ref is b.kernel_ref and a.symbol == b.symbol


def first_failing_check(binding: Binding, dtypes: tuple[DType, ...], backend: Backend | None,
                        layouts: Sequence[Layout] | None) -> str | None:
    """Why `binding` does not fit the request (the first failing check), or None if it does."""
    if backend is not None and binding.backend is not backend:
        return f"backend is {binding.backend}, not {backend}"
    inputs = binding.contract.inputs
    if len(dtypes) != len(binding.dtypes):
        return f"takes {len(inputs)} inputs + 1 output dtype, got {len(dtypes)} dtypes"
    names = [i.name for i in inputs] + [binding.contract.outputs[0].name]
    for name, want, have in zip(names, dtypes, binding.dtypes):
        if want is not have:
            return f"dtype of {name}: binding has {have}, asked for {want}"
    if layouts is not None:
        for spec, layout in zip(inputs, layouts):
            if spec.rank is not None and layout.ndim != spec.rank:
                return f"rank of {spec.name}: expected {spec.rank}, got {layout.ndim}"
            violation = spec.layout.violation(layout)
            if violation is not None:
                return f"layout of {spec.name}: {violation}"
    return None


def fan_out(contract: KernelContract) -> list[Binding]:
    """One linked, hashed Binding per dtype of `contract`'s fanned input."""
    fanned = contract.fanned_input or contract.inputs[0]
    for spec in contract.inputs:
        if spec is not fanned and len(spec.dtypes) > 1:
            raise spec.loc.error(f"input {spec.name!r} lists several dtypes but {fanned.name!r} is "
                                 "already the fanned input; only one input may fan", key="dtypes")
    links = _link_registry_for(contract)
    out_rule = contract.outputs[0].dtype_rule
    bindings = []
    for dtype in fanned.dtypes:
        ins = tuple(dtype if spec is fanned else spec.dtypes[0] for spec in contract.inputs)
        by_name = {spec.name: d for spec, d in zip(contract.inputs, ins)}
        out_dtype = out_rule.apply(by_name[out_rule.input])  # the rule computes it (DTYPE_RULES)
        key = BindingKey(contract.op_kind, (*ins, out_dtype), contract.backend, contract.kernel_source)
        symbol = f"{contract.entry_point}_{dtype.suffix}"
        ref = links.get(symbol)
        if ref is None:
            raise contract.loc_of("entry_point").error(
                f"entry point {symbol!r} is not in link registry {contract.provider.link_registry!r} "
                f"({len(links)} symbols registered)", key="entry_point")
        _check_meaning(contract, key, symbol, ref)
        cost_fn = fill_unset_cost_for_backend(contract, initial_cost(contract))
        revision = contract.kernel_revision_hash or revision_hash(contract, ref.code())
        bindings.append(Binding(key, symbol, ref, revision, contract, cost_fn))
    return bindings


def _check_meaning(contract: KernelContract, key: BindingKey, symbol: str, ref: KernelRef) -> None:
    """ContractError unless `ref` declares that it computes what `contract` says (op kind, inputs,
    output dtype rule) on `contract`'s backend: a document cannot change an op's meaning."""
    if ref.signature is None:
        why = "the kernel declares no signature (what it computes), so nothing can be linked to it"
    elif ref.backend is not contract.backend:
        why = f"the kernel runs on {ref.backend}, the contract declares backend {contract.backend}"
    else:
        why = ref.signature.mismatch(contract)
    if why is not None:
        computes = "" if ref.signature is None else f" ({ref.signature})"
        raise contract.loc_of("entry_point").error(
            f"binding {key} of kernel {contract.kernel!r} links {symbol!r} to kernel "
            f"{ref.name}{computes}: {why}; a binding must link to a kernel that computes its op",
            key="entry_point")


def _link_registry_for(contract: KernelContract) -> Any:
    name = contract.provider.link_registry
    links = link_registry(name)
    if links is None:
        known = ", ".join(link_registry_names()) or "none"
        raise contract.provider.loc_of("link_registry").error(
            f"link registry {name!r} is not registered; registered: {known}")
    return links


def revision_hash(contract: KernelContract, code: bytes) -> str:
    """Stable hash of the provider's revision_base, the canonical contract and the code bytes."""
    digest = hashlib.sha256()
    digest.update(contract.provider.revision_base.encode())
    digest.update(json.dumps(canonical(contract), sort_keys=True).encode())
    digest.update(code)
    return digest.hexdigest()[:16]


def canonical(value: Any) -> Any:
    """A JSON-able form of a contract (locations and prose left out) for hashing."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if hasattr(value, "text") and hasattr(value, "evaluate"):  # an Expr: its source text
            return value.text
        return {f.name: canonical(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.name not in ("loc", "doc") and not _unset_plan_condition(value, f)}
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (tuple, list)):
        return [canonical(v) for v in value]
    return value


def _unset_plan_condition(value: Any, f: dataclasses.Field) -> bool:
    """A plan condition of the caps (`device_kinds`, `misfit`) left at its default: left out of the
    canonical form, so contracts without one hash as they did before the keys existed."""
    return f.name in ("device_kinds", "misfit") and getattr(value, f.name) == f.default


def load_all(registry: Registry, sources: Iterable[str | Path]) -> list[Binding]:
    """Load several documents into `registry`; returns every new binding."""
    return [b for source in sources for b in registry.load(source)]
