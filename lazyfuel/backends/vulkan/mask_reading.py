"""How masked_fill and select_fill read their mask: in its own layout, a broadcast one included.

A user's mask is often smaller than the data and broadcast against it (np.where-style): a row mask
(N, 1) over (N, C) is a view of N bytes with stride 0 along the columns. The shaders
(`shaders/mask.glsl`) read such a view in place, from the row (and column) index of each element,
so neither a widened copy nor its device memory is ever made. `mask_reading(layout, width)` says
how: a mode (specialisation constant 5) and the mask's dense runs (push constants `mask_div` /
`mask_ext`, innermost first), or None where the layout is not a broadcast of a dense row-major
array the shaders can walk (the caller then contiguizes it on the device first).

The modes, cheapest first: `DENSE` (the mask is contiguous: byte el for element el), `PER_WORD`
(the innermost broadcast run covers whole 16-byte words: one byte per word, the W3 row mask),
`WORDS` (the innermost dim is dense over whole words: one mask word per data word, a column mask)
and `PER_ELEMENT` (one byte per element, any other broadcast).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from lazyfuel.backends.vulkan.copy_kernels import collapse
from lazyfuel.layout import Layout

DENSE, PER_WORD, WORDS, PER_ELEMENT = range(4)  # shaders/mask.glsl's MASK_MODE values
MAX_MASK_RUNS = 4  # the dense runs the push constants hold (a rank-8 broadcast has at most 4)
_LIMIT = 1 << 32  # runs, extents and mask offsets are 32-bit in the shaders


@dataclass(frozen=True)
class MaskReading:
    """A mask's mode and dense runs: run r repeats every `divs[r]` output elements and has
    `exts[r]` elements (innermost first); padded to `MAX_MASK_RUNS` with (1, 1)."""

    mode: int
    runs: tuple[tuple[int, int], ...] = ()
    inner_dense: bool = False  # run 0 is the output's innermost dim (its divisor is 1)
    outer_dense: bool = False  # the last run is the output's outermost dim (no broadcast outside it)

    @property
    def divs(self) -> list[int]:
        return [d for d, _ in self.runs] + [1] * (MAX_MASK_RUNS - len(self.runs))

    @property
    def exts(self) -> list[int]:
        return [e for _, e in self.runs] + [1] * (MAX_MASK_RUNS - len(self.runs))

    @property
    def spec(self) -> tuple[int, int, int, int]:
        """Specialisation constants 5 (mode), 6 (runs read), 7 and 8 (`inner_dense`, `outer_dense`)."""
        return self.mode, len(self.runs), int(self.inner_dense), int(self.outer_dense)


@lru_cache(maxsize=1024)
def mask_reading(layout: Layout, width: int) -> MaskReading | None:
    """How the shaders read a mask of `layout` (in elements, relative to its buffer) for data of
    `width`-byte elements, output element el taking the view's element el in row-major order;
    None where they cannot (strided, reversed, offset, or past 32-bit runs: contiguize it).
    A function of its (hashable) arguments alone, remembered: every masked_fill and select_fill
    step asks once per block (a broadcast (N, 1) mask costs ~8 µs to work out)."""
    if layout.is_contiguous:
        return MaskReading(DENSE)
    if layout.offset:
        return None
    flat = collapse(layout)
    per_word = 16 // width
    runs: list[tuple[int, int]] = []
    period, scale = 1, 1  # output elements per step of the dim; mask elements the inner runs hold
    for n, s in zip(reversed(flat.shape), reversed(flat.strides)):
        if s:
            if s != scale:
                return None  # not a broadcast of a dense row-major array
            runs.append((period, n))
            scale *= n
        period *= n
    if len(runs) > MAX_MASK_RUNS or scale >= _LIMIT or any(d >= _LIMIT for d, _ in runs):
        return None
    innermost = (flat.shape[-1], flat.strides[-1]) if flat.shape else (period, 0)
    ends = {"inner_dense": bool(runs) and innermost[1] != 0,
            "outer_dense": bool(runs) and flat.strides[0] != 0}
    if innermost[0] % per_word == 0:
        return MaskReading(PER_WORD if innermost[1] == 0 else WORDS, tuple(runs), **ends)
    return MaskReading(PER_ELEMENT, tuple(runs), **ends)


def by_rows(reading: MaskReading, row_elements: int) -> MaskReading | None:
    """`reading` (off the dense mode) recounted in output rows of `row_elements` elements, for a
    shader that finds the mask byte from the output row (select_fill's `MASK_BY_ROW`): where every
    run repeats a whole number of rows, the mask is the same over each row and its byte for row t
    lies at the runs' offset of t. None where some run repeats inside a row (a column mask)."""
    if reading.mode == DENSE or any(d % row_elements for d, _ in reading.runs):
        return None
    runs = tuple((d // row_elements, n) for d, n in reading.runs)
    return MaskReading(PER_WORD, runs, inner_dense=bool(runs) and runs[0][0] == 1,
                       outer_dense=reading.outer_dense)
