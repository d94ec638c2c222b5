"""Build one `KernelContract` from the composed YAML of a ```fkc block, strictly.

Each mapping is read torchgen style: its unknown keys are refused first (naming the keys allowed
there), then each known key is popped in schema order and its type and value checked, and the
leftovers are refused. Cross-field checks (a rule naming no input, a cost naming no field, a
backend disagreeing with the front matter) run once the pieces they need are read.
"""

from __future__ import annotations

import re
from typing import TypeVar

import yaml

from lazyfuel.contracts import schema
from lazyfuel.contracts.expr import Expr
from lazyfuel.contracts.model import (
    DTYPE_RULES,
    Acceptance,
    AwkwardLayoutStrategy,
    Backend,
    Caps,
    Cost,
    Determinism,
    DtypeRule,
    FastPath,
    FieldSpec,
    InputSpec,
    KernelContract,
    LayoutCaps,
    OpKind,
    OpParams,
    OutputSpec,
    Precision,
    Provenance,
    Provider,
    Requirement,
    ShapeRule,
    _Named,
)
from lazyfuel.contracts.nodes import Entries, Section
from lazyfuel.dtypes import DType

E = TypeVar("E", bound=_Named)
# validators are used with fullmatch: `$` alone would let a trailing newline through
_HEX = re.compile(r"^[0-9a-fA-F]+$")
_RULE = re.compile(r"^\s*(?P<kind>[A-Za-z_]\w*)\s*\((?P<args>[^()]*)\)\s*$")
_IDENT = re.compile(r"^[A-Za-z_]\w*$")
_KERNEL_NAME = re.compile(r"^[A-Za-z_][\w.\-]*$")
COST_NAMES = ("dtype_bytes", "n")  # names a cost expression may use besides the op-param fields
# the kinds of device `caps.device_kinds` may name (a Vulkan device's `DeviceInfo.kind`)
DEVICE_KINDS = ("discrete", "integrated", "virtual", "cpu", "other")


def read_kernel(sec: Section, node: yaml.Node | None, fence_line: int, provider: Provider) -> KernelContract:
    """The contract declared by one block (`node` composed from it); ContractError if malformed.

    A key missing at the top of the block is reported at the block's opening fence line.
    """
    if node is None:
        raise sec.error_at(fence_line, "kernel", "empty ```fkc block; it must declare a kernel")
    top = sec.mapping(node, "kernel", "the fkc block", schema.KERNEL.keys, fence_line)
    name_node = top.pop("kernel")
    name = sec.string(name_node, "kernel")
    if not _KERNEL_NAME.fullmatch(name):
        raise sec.error(name_node, "kernel", f"kernel name {name!r} must be one word (letters, digits, "
                        "_ . -), starting with a letter or _")
    where = f"kernel {name!r}"
    top.where = where
    op_kind = _enum(sec, top.pop("op_kind"), "op_kind", OpKind)
    blurb = sec.string(top.pop("blurb"), "blurb")
    backend_node = top.pop("backend")
    backend = _enum(sec, backend_node, "backend", Backend)
    if backend is not provider.backend:
        raise sec.error(backend_node, "backend", f"backend {backend.name} disagrees with the front matter's "
                        f"provider backend {provider.backend.name}; one document declares one backend")
    source_node = top.pop("kernel_source")
    kernel_source = sec.string(source_node, "kernel_source")
    if kernel_source != provider.kernel_source:
        raise sec.error(source_node, "kernel_source", f"kernel_source {kernel_source!r} disagrees with the "
                        f"front matter's provider kernel_source {provider.kernel_source!r}")
    entry_point = sec.string(top.pop("entry_point"), "entry_point")
    revision = _revision(sec, top.pop("kernel_revision_hash"))
    inputs = _inputs(sec, top.pop_mapping("accept", "accept", schema.ACCEPT.keys))
    op_params = _op_params(sec, top.pop_mapping("op_params", "op_params", schema.OP_PARAMS.keys))
    outputs = _outputs(sec, top.pop_mapping("return", "return", schema.RETURN.keys), inputs, op_params)
    caps = _caps(sec, top.pop_mapping("caps", "caps", schema.CAPS.keys), op_params)
    cost = _cost(sec, top.pop_mapping("cost", "cost", schema.COST.keys), op_params)
    precision = _precision(sec, top.pop_mapping("precision", "precision", schema.PRECISION.keys))
    determinism = _enum(sec, top.pop("determinism"), "determinism", Determinism)
    top.done()
    return KernelContract(
        kernel=name, op_kind=op_kind, blurb=blurb, backend=backend, kernel_source=kernel_source,
        entry_point=entry_point, kernel_revision_hash=revision, inputs=inputs, op_params=op_params,
        outputs=outputs, caps=caps, cost=cost, precision=precision, determinism=determinism,
        provider=provider, loc=sec.loc(name_node, "kernel"), key_lines=tuple(top.key_lines.items()),
    )


def _name(sec: Section, node: yaml.Node, key: str) -> str:
    value = sec.string(node, key)
    if not _IDENT.fullmatch(value):
        raise sec.error(node, key, f"{key} {value!r} must be a name (letters, digits, _), not starting "
                        "with a digit")
    return value


def _enum(sec: Section, node: yaml.Node, key: str, enum: type[E]) -> E:
    """The member of `enum` named by the scalar `node`; ContractError listing the accepted names."""
    value = sec.scalar(node, key)
    try:
        if not isinstance(value, str):
            raise ValueError(f"unknown {enum.__name__} {value!r}; expected one of "
                             f"{' '.join(m.value for m in enum)}")
        return enum.parse(value)  # type: ignore[return-value]  # _Named.parse returns the subclass
    except ValueError as exc:
        raise sec.error(node, key, str(exc)) from None


def _revision(sec: Section, node: yaml.Node) -> str | None:
    if not isinstance(node, yaml.ScalarNode) or node.tag.rsplit(":", 1)[-1] not in ("str", "int"):
        raise sec.error(node, "kernel_revision_hash", "kernel_revision_hash must be `auto` or a hex string")
    text = node.value.strip()
    if text == "auto":
        return None
    if not _HEX.fullmatch(text):
        raise sec.error(node, "kernel_revision_hash", f"kernel_revision_hash {text!r} is neither `auto` nor "
                        "a hex string (digits 0-9 and letters a-f)")
    return text.lower()


def _list_of_maps(sec: Section, outer: Entries, list_key: str, item: schema.Map) -> list[Entries]:
    line = outer.key_lines.get(list_key, outer.line)
    items = sec.sequence(outer.pop(list_key), list_key)
    outer.done()
    if not items:
        raise sec.error_at(line, list_key, f"{outer.where}.{list_key} must list at least one entry")
    where = f"{outer.where}.{list_key}"
    return [sec.mapping(n, list_key, f"{where}[{i}]", item.keys) for i, n in enumerate(items)]


def _unique_name(sec: Section, entries: Entries, taken: list[str], what: str, where: str) -> str:
    """Pop an entry's `name`: an identifier not already in `taken` (ContractError otherwise)."""
    name_node = entries.pop("name")
    name = _name(sec, name_node, "name")
    if name in taken:
        raise sec.error(name_node, "name", f"duplicate {what} name {name!r} in {where}")
    return name


def _inputs(sec: Section, accept: Entries) -> tuple[InputSpec, ...]:
    specs: list[InputSpec] = []
    for entries in _list_of_maps(sec, accept, "inputs", schema.INPUT):
        name = _unique_name(sec, entries, [s.name for s in specs], "input", "accept.inputs")
        dtypes_node = entries.pop("dtypes")
        dtypes = tuple(_dtype(sec, d) for d in sec.sequence(dtypes_node, "dtypes"))
        if not dtypes:
            raise sec.error(dtypes_node, "dtypes", "dtypes must list at least one dtype")
        if len(set(dtypes)) != len(dtypes):
            raise sec.error(dtypes_node, "dtypes", "dtypes lists a dtype twice")
        layout = _layout(sec, entries.pop_mapping("layout", "layout", schema.LAYOUT_KEYS))
        rank = _rank(sec, entries.pop("rank"))
        shape = entries.pop_optional("shape_constraint")
        constraint = "" if shape is None else sec.string(shape, "shape_constraint", allow_empty=True)
        entries.done()
        specs.append(InputSpec(name, dtypes, layout, rank, constraint, sec.loc(entries.node, "inputs")))
    return tuple(specs)


def _dtype(sec: Section, node: yaml.Node) -> DType:
    value = sec.scalar(node, "dtypes")
    try:
        return DType.parse(value if isinstance(value, str) else repr(value))
    except ValueError as exc:
        raise sec.error(node, "dtypes", str(exc)) from None


def _layout(sec: Section, entries: Entries) -> LayoutCaps:
    caps = {key: _enum(sec, entries.pop(key), key, Requirement if key == "contiguous" else Acceptance)
            for key in schema.LAYOUT_KEYS}
    entries.done()
    return LayoutCaps(**caps)


def _rank(sec: Section, node: yaml.Node) -> int | None:
    value = sec.scalar(node, "rank")
    if value == "any":
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise sec.error(node, "rank", f"rank must be `any` or an integer >= 0, got {value!r}")
    return value


def _op_params(sec: Section, entries: Entries) -> OpParams:
    variant = sec.string(entries.pop("variant"), "variant")
    fields_node = entries.pop("fields")
    entries.done()
    if isinstance(fields_node, yaml.ScalarNode) and fields_node.tag.endswith(":null"):
        return OpParams(variant, ())  # `fields:` with nothing under it
    fields = []
    for name, (key_node, value) in sec.free_mapping(fields_node, "fields", "op_params.fields").items.items():
        if not _IDENT.fullmatch(name):
            raise sec.error(key_node, name, f"field name {name!r} must be a name (letters, digits, _)")
        if name in COST_NAMES:
            raise sec.error(key_node, name, f"field name {name!r} is reserved for cost expressions")
        spec = sec.mapping(value, name, f"field {name!r}", schema.FIELDS.item_keys, sec.line(key_node))
        kind = sec.string(spec.pop("kind"), "kind")
        note, constraint = (spec.pop_optional(k) for k in ("note", "constraint"))
        spec.done()
        fields.append(FieldSpec(
            name, kind, "" if note is None else sec.string(note, "note", allow_empty=True),
            "" if constraint is None else sec.string(constraint, "constraint", allow_empty=True)))
    return OpParams(variant, tuple(fields))


def _outputs(sec: Section, ret: Entries, inputs: tuple[InputSpec, ...], params: OpParams,
             ) -> tuple[OutputSpec, ...]:
    input_names = [s.name for s in inputs]
    specs: list[OutputSpec] = []
    for entries in _list_of_maps(sec, ret, "outputs", schema.OUTPUT):
        name = _unique_name(sec, entries, [s.name for s in specs], "output", "return.outputs")
        dtype_node = entries.pop("dtype_rule")
        dtype_rule = _dtype_rule(sec, dtype_node, inputs)
        shape_node = entries.pop("shape_rule")
        shape = ShapeRule(*_rule(sec, shape_node, "shape_rule",
                                 {"from_params": list(params.names), "same_as": input_names}))
        if shape.kind == "same_as" and len(shape.args) != 1:
            raise sec.error(shape_node, "shape_rule", "same_as takes exactly one input name")
        guarantee = sec.string(entries.pop("layout_guarantee"), "layout_guarantee")
        aliasing = sec.string(entries.pop("aliasing"), "aliasing")
        entries.done()
        specs.append(OutputSpec(name, dtype_rule, shape, guarantee, aliasing))
    return tuple(specs)


def _dtype_rule(sec: Section, node: yaml.Node, inputs: tuple[InputSpec, ...]) -> DtypeRule:
    """`<rule>(<input>)`, the rule one of DTYPE_RULES and defined for every dtype the input lists."""
    names = [s.name for s in inputs]
    kind, args = _rule(sec, node, "dtype_rule", dict.fromkeys(DTYPE_RULES, names))
    if len(args) != 1:
        raise sec.error(node, "dtype_rule", f"{kind} takes exactly one input name")
    rule = DtypeRule(args[0], kind)
    for dtype in next(s for s in inputs if s.name == rule.input).dtypes:
        try:
            rule.apply(dtype)
        except ValueError as exc:
            raise sec.error(node, "dtype_rule", str(exc)) from None
    return rule


def _rule(sec: Section, node: yaml.Node, key: str, kinds: dict[str, list[str]],
          ) -> tuple[str, tuple[str, ...]]:
    """Parse `kind(a, b, …)`, `kind` one of `kinds`, each argument one of `kinds[kind]`."""
    text = sec.string(node, key)
    forms = " or ".join(f"{k}(…)" for k in kinds)
    match = _RULE.match(text)
    if match is None or match["kind"] not in kinds:
        raise sec.error(node, key, f"{key} {text!r} is not understood; expected {forms}")
    args = tuple(a.strip() for a in match["args"].split(",")) if match["args"].strip() else ()
    allowed = kinds[match["kind"]]
    what = "op_params field" if match["kind"] == "from_params" else "input"
    if not args:
        raise sec.error(node, key, f"{match['kind']}() needs at least one {what} name")
    for arg in args:
        if arg not in allowed:
            raise sec.error(node, key, f"{match['kind']}({arg}) names no {what}; "
                            f"{what}s: {', '.join(allowed) or '(none)'}")
    return match["kind"], args


def _caps(sec: Section, entries: Entries, params: OpParams) -> Caps:
    strategy = _enum(sec, entries.pop("awkward_layout_strategy"), "awkward_layout_strategy",
                     AwkwardLayoutStrategy)
    fast_paths = []
    for i, item in enumerate(sec.sequence(entries.pop("fast_paths"), "fast_paths")):
        path = sec.mapping(item, "fast_paths", f"caps.fast_paths[{i}]", schema.FAST_PATH_KEYS)
        when, cls = sec.string(path.pop("when"), "when"), sec.string(path.pop("class"), "class")
        fast_paths.append(FastPath(when, cls))
        path.done()
    caps = Caps(
        strategy, tuple(fast_paths), sec.boolean(entries.pop("in_place"), "in_place"),
        sec.integer(entries.pop("alignment_bytes"), "alignment_bytes"),
        sec.integer(entries.pop("access_granularity_bits"), "access_granularity_bits"),
        _device_kinds(sec, entries.pop_optional("device_kinds")),
        _misfit(sec, entries.pop_optional("misfit"), params),
    )
    entries.done()
    return caps


def _device_kinds(sec: Section, node: yaml.Node | None) -> tuple[str, ...]:
    """`caps.device_kinds`: the kinds of device the planner considers the binding on (absent: any)."""
    if node is None:
        return ()
    kinds = tuple(sec.string(k, "device_kinds") for k in sec.sequence(node, "device_kinds"))
    unknown = [k for k in kinds if k not in DEVICE_KINDS]
    if not kinds or unknown or len(set(kinds)) != len(kinds):
        raise sec.error(node, "device_kinds", f"device_kinds must list device kinds, each once, from "
                        f"{', '.join(DEVICE_KINDS)}; got [{', '.join(kinds)}]")
    return kinds


def _misfit(sec: Section, node: yaml.Node | None, params: OpParams) -> Expr | None:
    """`caps.misfit`: an arithmetic expression over the op params (as a cost's) that is 0 exactly
    where the kernel can run them; the planner passes the binding over elsewhere (absent: always)."""
    if node is None:
        return None
    if not isinstance(node, yaml.ScalarNode):
        raise sec.error(node, "misfit", f"misfit must be an arithmetic expression, got a {node.tag} value")
    return Expr.parse(node.value, (*params.names, *COST_NAMES), sec.loc(node, "misfit"))


def _cost(sec: Section, entries: Entries, params: OpParams) -> Cost:
    provenance = _enum(sec, entries.pop("provenance"), "provenance", Provenance)
    cls = sec.string(entries.pop("class"), "class")
    allowed = (*params.names, *COST_NAMES)
    exprs = []
    for key in ("flops", "bytes_moved"):
        value = entries.pop(key)
        tag = value.tag.rsplit(":", 1)[-1]
        if not isinstance(value, yaml.ScalarNode) or tag not in ("str", "int", "float"):
            raise sec.error(value, key, f"{key} must be an arithmetic expression, got a {value.tag} value")
        expr = Expr.parse(value.value, allowed, sec.loc(value, key))
        unsound = expr.unsound_cost()
        if unsound is not None:
            raise sec.error(value, key, f"cost {key} {unsound}; a cost must be a finite number >= 0 "
                            "for every size")
        exprs.append(expr)
    entries.done()
    return Cost(provenance, cls, exprs[0], exprs[1])


def _precision(sec: Section, entries: Entries) -> Precision:
    stable = sec.boolean(entries.pop("bit_stable_on_same_hardware"), "bit_stable_on_same_hardware")
    ulp, rel, absolute = (sec.number(entries.pop(k), k) for k in ("max_ulp", "max_relative", "max_absolute"))
    audited = sec.boolean(entries.pop("audited"), "audited")
    notes = entries.pop_optional("notes")
    entries.done()
    return Precision(stable, ulp, rel, absolute, audited,
                     "" if notes is None else sec.string(notes, "notes", allow_empty=True))
