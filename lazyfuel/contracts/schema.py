"""The fixed key tree of an FKC document: which keys exist and which keys sit under which parent.

One table serves three readers: `flatten` rebuilds the nesting of a flattened block from it,
`parse` names the keys allowed where it finds an unknown one, and `fmt` emits keys in its order.
Names under `op_params.fields` are free-form (`Free`): each is a field whose value is a
`{kind: …}` flow mapping.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Leaf:
    """A scalar or flow value: nothing nests under it in block style."""


@dataclass(frozen=True)
class Map:
    """A block mapping with a fixed set of keys, in canonical order."""

    keys: dict[str, Node]
    optional: frozenset[str] = frozenset()

    @property
    def required(self) -> tuple[str, ...]:
        """The keys that must be present."""
        return tuple(k for k in self.keys if k not in self.optional)


@dataclass(frozen=True)
class Seq:
    """A block sequence whose items are `item`."""

    item: Node


@dataclass(frozen=True)
class Free:
    """A mapping with free-form keys, each holding a flow mapping (`op_params.fields`)."""

    item_keys: tuple[str, ...]
    item_required: tuple[str, ...]


Node = Leaf | Map | Seq | Free
LEAF = Leaf()

LAYOUT_KEYS = ("contiguous", "strided", "broadcast_stride0", "start_offset", "reverse_strides")
FAST_PATH_KEYS = ("when", "class")

PROVIDER = Map({k: LEAF for k in ("name", "backend", "kernel_source", "link_registry", "revision_base")})
FRONT_MATTER = Map({"fkc_version": LEAF, "provider": PROVIDER})

INPUT = Map(
    {k: LEAF for k in ("name", "dtypes", "layout", "rank", "shape_constraint")},
    optional=frozenset({"shape_constraint"}),
)
OUTPUT = Map({k: LEAF for k in ("name", "dtype_rule", "shape_rule", "layout_guarantee", "aliasing")})
FIELDS = Free(item_keys=("kind", "note", "constraint"), item_required=("kind",))
ACCEPT = Map({"inputs": Seq(INPUT)})
OP_PARAMS = Map({"variant": LEAF, "fields": FIELDS})
RETURN = Map({"outputs": Seq(OUTPUT)})
CAPS = Map({
    "awkward_layout_strategy": LEAF,
    "fast_paths": Seq(Map({k: LEAF for k in FAST_PATH_KEYS})),
    "in_place": LEAF,
    "alignment_bytes": LEAF,
    "access_granularity_bits": LEAF,
    "device_kinds": LEAF,
    "misfit": LEAF,
}, optional=frozenset({"device_kinds", "misfit"}))
COST = Map({k: LEAF for k in ("provenance", "class", "flops", "bytes_moved")})
PRECISION = Map(
    {k: LEAF for k in (
        "bit_stable_on_same_hardware", "max_ulp", "max_relative", "max_absolute", "audited", "notes")},
    optional=frozenset({"notes"}),
)
KERNEL = Map({
    "kernel": LEAF,
    "op_kind": LEAF,
    "blurb": LEAF,
    "backend": LEAF,
    "kernel_source": LEAF,
    "entry_point": LEAF,
    "kernel_revision_hash": LEAF,
    "accept": ACCEPT,
    "op_params": OP_PARAMS,
    "return": RETURN,
    "caps": CAPS,
    "cost": COST,
    "precision": PRECISION,
    "determinism": LEAF,
})
