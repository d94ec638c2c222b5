"""Re-indenting flattened blocks from the schema: nesting rebuilt, lines kept 1:1."""

from __future__ import annotations

import yaml

from lazyfuel.contracts import schema
from lazyfuel.contracts.flatten import analyse, flatten_block, is_indented, reindent, where
from lazyfuel.contracts.fmt import format_text
from lazyfuel.contracts.parse import split_lines, yaml_sections


def _flat(text: str) -> list[str]:
    return [line.strip() for line in text.strip().split("\n")]


def test_seed_blocks_nest_like_their_canonical_form(seed_text: str) -> None:
    flat_sections = yaml_sections(split_lines(seed_text))
    canonical_sections = yaml_sections(split_lines(format_text(seed_text)))
    roots = [schema.FRONT_MATTER] + [schema.KERNEL] * (len(flat_sections) - 1)
    for flat, canonical, root in zip(flat_sections, canonical_sections, roots):
        assert not is_indented(flat)
        rebuilt = reindent(flat, root)
        assert len(rebuilt) == len(flat)  # 1:1, so YAML marks are document lines
        assert [line.strip() for line in rebuilt] == [line.strip() for line in flat]
        assert yaml.safe_load("\n".join(rebuilt)) == yaml.safe_load("\n".join(canonical))


def test_front_matter_keys_go_under_provider() -> None:
    lines = _flat("""
        fkc_version: 1
        provider:
        name: p
        backend: Cpu
        """)
    expected = ["fkc_version: 1", "provider:", "  name: p", "  backend: Cpu"]
    assert reindent(lines, schema.FRONT_MATTER) == expected


def test_keys_return_to_the_parent_that_knows_them() -> None:
    lines = _flat("""
        accept:
        inputs:
        - name: a
        rank: any
        - name: b
        op_params:
        variant: V
        fields:
        x: { kind: usize }
        return:
        """)
    assert reindent(lines, schema.KERNEL) == [
        "accept:", "  inputs:", "    - name: a", "      rank: any", "    - name: b",
        "op_params:", "  variant: V", "  fields:", "    x: { kind: usize }", "return:"]


def test_block_style_fast_path_items() -> None:
    lines = _flat("""
        caps:
        fast_paths:
        - when: w
        class: c
        in_place: false
        cost:
        class: k
        """)
    data = yaml.safe_load("\n".join(reindent(lines, schema.KERNEL)))
    assert data == {"caps": {"fast_paths": [{"when": "w", "class": "c"}], "in_place": False},
                    "cost": {"class": "k"}}


def test_multi_line_flow_mappings_and_strings_are_continuations() -> None:
    lines = _flat("""
        accept:
        inputs:
        - name: a
        layout: { contiguous: required,
        strided: rejected }
        shape_constraint: "first line
        second line"
        rank: 1
        """)
    data = yaml.safe_load("\n".join(reindent(lines, schema.KERNEL)))
    spec = data["accept"]["inputs"][0]
    assert spec["layout"] == {"contiguous": "required", "strided": "rejected"}
    assert spec["shape_constraint"] == "first line second line"
    assert spec["rank"] == 1


def test_block_scalars_run_until_a_known_key() -> None:
    lines = _flat("""
        precision:
        notes: |
        exact: no arithmetic
        second line
        audited: true
        """)
    data = yaml.safe_load("\n".join(reindent(lines, schema.KERNEL)))
    assert data == {"precision": {"notes": "exact: no arithmetic\nsecond line\n", "audited": True}}


def test_comments_and_blank_lines_keep_their_place() -> None:
    lines = _flat("""
        caps:
        # a comment about in_place
        in_place: true # trailing

        alignment_bytes: 4
        """)
    out = reindent(lines, schema.KERNEL)
    assert out == ["caps:", "  # a comment about in_place", "  in_place: true # trailing", "",
                   "  alignment_bytes: 4"]
    infos = analyse(lines, schema.KERNEL)
    assert infos[2].path == ("caps", "in_place") and infos[2].comment == "# trailing"
    assert [i.kind for i in infos] == ["key", "comment", "key", "blank", "key"]


def test_quoted_hash_is_no_comment() -> None:
    info = analyse(['notes: "a # b" # c'], schema.KERNEL)[0]
    assert info.comment == "# c"


def test_already_indented_blocks_are_left_alone() -> None:
    lines = ["accept:", "  inputs:", "  - name: a", "    rank: any"]
    assert is_indented(lines)
    assert reindent(lines, schema.KERNEL) == lines


def test_document_markers_stay_at_column_zero() -> None:
    assert reindent(["determinism: bitwise", "---", "kernel: x"], schema.KERNEL)[1] == "---"


def test_unknown_keys_are_reported_where_they_landed() -> None:
    lines = _flat("""
        acept:
        inputs:
        precision:
        audted: true
        """)
    _, unknown = flatten_block(lines, schema.KERNEL)
    assert unknown[0] == (0, "acept", "", tuple(schema.KERNEL.keys))
    assert unknown[1][:3] == (1, "inputs", "")
    assert unknown[2] == (3, "audted", "precision", tuple(schema.PRECISION.keys))


def test_where_names_key_paths() -> None:
    assert where(("accept", "inputs", 0)) == "accept.inputs[0]"
    assert where(()) == ""


def test_field_names_are_free_but_need_a_flow_mapping() -> None:
    lines = _flat("""
        op_params:
        fields:
        return: { kind: usize }
        variant: V
        """)
    data = yaml.safe_load("\n".join(reindent(lines, schema.KERNEL)))
    assert data == {"op_params": {"fields": {"return": {"kind": "usize"}}, "variant": "V"}}
