"""Push-constant layouts (`ops.push`): each spec's layout is its shader's block, member by member;
values follow the block and strays are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from lazyfuel.ops import specs
from lazyfuel.ops.push import PushLayout, parse_glsl

SHADERS = Path(__file__).resolve().parents[2] / "shaders"



@pytest.mark.parametrize("spec", [s for s in specs() if s.push is not None], ids=lambda s: s.name)
def test_push_layouts_are_the_shaders_blocks(spec) -> None:
    """What the Vulkan kernel packs is, member by member and type by type, what its shader reads."""
    declared = parse_glsl((SHADERS / f"{spec.shader}.comp").read_text())
    assert spec.push.members == declared.members
    assert spec.push.format == declared.format and spec.push.base_slot == declared.base_slot


def test_push_values_follow_the_block_and_refuse_strays() -> None:
    layout = PushLayout.of("uint64_t src", "uint64_t base", "uvec4 fill", "uint shape[2]")
    assert layout.format == "<QQ4III" and layout.base_slot == 1
    assert layout.values(shape=(5, 6), fill=(1, 2, 3, 4), base=0, src=9) == [9, 0, 1, 2, 3, 4, 5, 6]
    with pytest.raises(ValueError, match=r"missing \['fill'\], unknown \['fil'\]"):
        layout.values(src=1, base=0, fil=(1, 2, 3, 4), shape=(1, 1))
    with pytest.raises(ValueError, match=r"push constant shape takes 2 value\(s\), got 3"):
        layout.values(src=1, base=0, fill=(1, 2, 3, 4), shape=(1, 1, 1))
    with pytest.raises(ValueError, match="no layout"):
        parse_glsl("void main() {}")
