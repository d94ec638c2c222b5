"""`lazyfuel.contracts.schema`: the fixed key tree of a contract document. Every block and front
matter of the shipped documents (canonical form) holds exactly keys the tree allows, every
required one, in the tree's order; the tree's own parts answer their required keys."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

import lazyfuel
from lazyfuel.contracts import schema
from lazyfuel.contracts.schema import Free, Leaf, Map, Seq

DOCUMENTS = sorted((Path(lazyfuel.__file__).parent / "contracts").glob("*.md"))
BLOCK = re.compile(r"^```fkc\n(.*?)^```", re.MULTILINE | re.DOTALL)


def problems(value: object, node: schema.Node, where: str) -> list[str]:
    """What in `value` the tree `node` does not allow (empty when it conforms)."""
    if isinstance(node, Leaf):
        return []
    if isinstance(node, Seq):
        if not isinstance(value, list):
            return [f"{where}: not a sequence"]
        return [p for i, item in enumerate(value) for p in problems(item, node.item, f"{where}[{i}]")]
    if not isinstance(value, dict):
        return [f"{where}: not a mapping"]
    if isinstance(node, Free):
        return [f"{where}.{name}: {sorted(set(field) - set(node.item_keys))} or missing "
                f"{sorted(set(node.item_required) - set(field))}"
                for name, field in value.items()
                if not set(field) <= set(node.item_keys) or not set(node.item_required) <= set(field)]
    found = [f"{where}: unknown key {k!r}" for k in value if k not in node.keys]
    found += [f"{where}: missing {k!r}" for k in node.required if k not in value]
    order = [k for k in node.keys if k in value]
    if not found and list(value) != order:
        found.append(f"{where}: keys {list(value)} not in the tree's order {order}")
    return found + [p for k, v in value.items() if k in node.keys
                    for p in problems(v, node.keys[k], f"{where}.{k}")]


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.name)
def test_a_shipped_document_holds_exactly_the_trees_keys_in_its_order(path: Path):
    text = path.read_text(encoding="utf-8")
    front = yaml.safe_load(text.split("---\n")[1])
    assert problems(front, schema.FRONT_MATTER, "front matter") == []
    blocks = BLOCK.findall(text)
    assert blocks
    for block in blocks:
        kernel = yaml.safe_load(block)
        assert problems(kernel, schema.KERNEL, kernel["kernel"]) == []


def test_the_walker_sees_what_the_tree_refuses():
    assert problems({"fkc_version": 1}, schema.FRONT_MATTER, "fm") == ["fm: missing 'provider'"]
    assert problems({"provider": {}, "fkc_version": 1}, schema.FRONT_MATTER, "fm")[0].startswith(
        "fm: keys ['provider', 'fkc_version'] not in the tree's order")


def test_required_keys_are_the_keys_less_the_optional_ones_in_order():
    assert schema.INPUT.required == ("name", "dtypes", "layout", "rank")
    assert schema.PRECISION.required == ("bit_stable_on_same_hardware", "max_ulp", "max_relative",
                                         "max_absolute", "audited")
    assert schema.KERNEL.required == tuple(schema.KERNEL.keys)
    assert Map({"a": schema.LEAF, "b": schema.LEAF}, optional=frozenset({"a"})).required == ("b",)


def test_the_tree_nests_where_the_documents_nest():
    assert isinstance(schema.KERNEL.keys["accept"].keys["inputs"], Seq)
    assert schema.KERNEL.keys["accept"].keys["inputs"].item is schema.INPUT
    assert schema.OP_PARAMS.keys["fields"] == Free(("kind", "note", "constraint"), ("kind",))
    assert tuple(schema.CAPS.keys["fast_paths"].item.keys) == schema.FAST_PATH_KEYS
    assert schema.LAYOUT_KEYS == ("contiguous", "strided", "broadcast_stride0", "start_offset",
                                  "reverse_strides")
