"""Push-constant layouts: the block a compute shader declares, as one frozen record per kernel.

`PushLayout` lists a shader's `layout(push_constant)` members in order with their GLSL types;
from it come the `struct` format the host packs, the slot of `base` (the first item of a tiled
dispatch, which `Batch.dispatch` rewrites per tile) and `values(**members)`, which puts named
values in the shader's order (ValueError naming what is missing or unknown). An op's module
declares the layout of its shader (`ops/index_select.py` ...), so a kernel never writes a format
string of its own; `parse_glsl` reads a shader's block back (the tests compare the two).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from operator import itemgetter
from typing import Any

# GLSL member type -> (struct code, scalars it holds)
TYPES = {"uint64_t": ("Q", 1), "int64_t": ("q", 1), "uint": ("I", 1), "int": ("i", 1), "uvec4": ("4I", 4)}
_MEMBER = re.compile(r"^\s*(\w+)\s+(\w+)\s*(?:\[(\d+)\])?\s*;")


@dataclass(frozen=True)
class PushLayout:
    """A push-constant block: `members` are `(name, GLSL type, array length)` in declaration order
    (length 1 for a scalar); `base` names the member holding a dispatch tile's first item."""

    members: tuple[tuple[str, str, int], ...]
    base: str = "base"

    @classmethod
    def of(cls, *members: str, base: str = "base") -> PushLayout:
        """From declarations as the shader writes them: `PushLayout.of("uint64_t src", "uint shape[8]")`."""
        return cls(tuple(_member(m + ";") for m in members), base)

    @cached_property
    def format(self) -> str:
        """The little-endian `struct` format of the block (GLSL's std430 packing of these members:
        every 64-bit member comes at an 8-byte offset in the layouts declared here)."""
        return "<" + "".join(_code(t, n) for _, t, n in self.members)

    @cached_property
    def base_slot(self) -> int:
        """The position of `base` among the flattened values."""
        slot = 0
        for name, gl_type, length in self.members:
            if name == self.base:
                return slot
            slot += TYPES[gl_type][1] * length
        raise ValueError(f"push constants {self.names} have no member {self.base!r}")

    @cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _, _ in self.members)

    def values(self, **members: Any) -> list[Any]:
        """The flattened values, in the block's order, of `members` (a scalar, or a sequence of the
        member's length for arrays and vectors); ValueError naming missing or unknown members."""
        try:
            picked = self._pick(members) if len(members) == len(self.members) else None
        except KeyError:
            picked = None
        if picked is None:
            missing = [n for n in self.names if n not in members]
            unknown = [n for n in members if n not in self.names]
            raise ValueError(f"push constants ({', '.join(self.names)}): missing {missing}, "
                             f"unknown {unknown}")
        if not any(self._counts):
            return list(picked)
        flat: list[Any] = []
        for name, value, count in zip(self.names, picked, self._counts):
            if not count:  # a scalar: struct.pack refuses anything else
                flat.append(value)
                continue
            items = list(value)
            if len(items) != count:
                raise ValueError(f"push constant {name} takes {count} value(s), got {len(items)}")
            flat.extend(items)
        return flat

    @cached_property
    def _pick(self) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
        """The members' values in the block's order, as a tuple (KeyError for a missing one)."""
        getter = itemgetter(*self.names)
        return getter if len(self.names) > 1 else lambda members: (getter(members),)

    @cached_property
    def _counts(self) -> tuple[int, ...]:
        """The scalars each member holds (0 for a scalar: passed as it is)."""
        sizes = [TYPES[gl_type][1] * length for _, gl_type, length in self.members]
        return tuple(0 if size == 1 else size for size in sizes)


def _code(gl_type: str, length: int) -> str:
    code = TYPES[gl_type][0]
    return code * length if length > 1 else code


def _member(line: str) -> tuple[str, str, int]:
    found = _MEMBER.match(line)
    if found is None or found.group(1) not in TYPES:
        raise ValueError(f"not a push-constant member of a known type ({', '.join(TYPES)}): {line.strip()!r}")
    return found.group(2), found.group(1), int(found.group(3) or 1)


def parse_glsl(source: str) -> PushLayout:
    """The `layout(push_constant)` block of a GLSL shader's `source` (comments dropped)."""
    block = re.search(r"layout\s*\(\s*push_constant\s*\)\s*uniform\s+\w+\s*\{(.*?)\}", source, re.S)
    if block is None:
        raise ValueError("the shader declares no layout(push_constant) block")
    lines = [re.sub(r"//.*", "", line) for line in block.group(1).splitlines()]
    return PushLayout(tuple(_member(line) for line in lines if line.strip()))
