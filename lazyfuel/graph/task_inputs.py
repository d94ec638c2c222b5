"""A task's program inputs made from its arguments: numpy views of chunks (`Part`), concrete and lazy
index blocks (`Const`, `LazyIndex`), a select's source from the chunks its indices hit
(`Gathered`) or from the pieces read for the block (`Assembled`); each gives its arrays and, before
any chunk exists, its signature (`graph.task` says how a recipe uses them).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lazyfuel.backends.base import is_device_block
from lazyfuel.dtypes import DType
from lazyfuel.graph import crossing
from lazyfuel.graph.device_blocks import joined
from lazyfuel.graph.indices import checked_block, kernel_dtype, narrowed, shifted
from lazyfuel.graph.ir import ViewOp
from lazyfuel.graph.kept_indices import kept_input, one_part
from lazyfuel.graph.span import spanning_view
from lazyfuel.layout import Layout
from lazyfuel.ops.views import VIEWS

ArgMeta = tuple[tuple[int, ...], np.dtype]  # shape and dtype of one task argument
Signature = tuple[DType, Layout]


# the numpy rule of each view (`lazyfuel.ops.views`), and of the post view `reshape` (a gather's
# elements, after its program)
_NUMPY_VIEWS: dict[str, Callable[[np.ndarray, dict[str, Any]], np.ndarray]] = {
    **{name: view.numpy for name, view in VIEWS.items()},
    "reshape": lambda a, attr: a.reshape(attr["shape"]),
}


def apply_views(a: np.ndarray, views: Sequence[ViewOp]) -> np.ndarray:
    """`a` viewed through each op in turn (numpy views: no data moves)."""
    for op, attrs in views:
        a = _NUMPY_VIEWS[op](a, dict(attrs))
    return a


def view_layout(lay: Layout, views: Sequence[ViewOp]) -> Layout:
    """The layout `apply_views` would give an array of layout `lay`."""
    for op, attrs in views:
        lay = VIEWS[op].layout(lay, dict(attrs))
    return lay


@dataclass(frozen=True)
class Part:
    """Task argument `arg` seen through numpy `views`."""

    arg: int
    views: tuple[ViewOp, ...] = ()

    def arrays(self, args: Sequence[Any]) -> list[np.ndarray]:
        chunk = args[self.arg]
        if crossing.is_device_chunk(chunk):
            if not self.views:
                return [chunk]  # left on the device for the next program (`graph.crossing`)
            viewed = getattr(chunk, "viewed", None)  # a resident block seen through the views in place
            layout = view_layout(Layout.contiguous(chunk.shape), self.views)
            found = None if viewed is None else viewed(layout)
            if found is not None:
                return [found]
        return [apply_views(np.asarray(chunk), self.views)]

    def signature(self, metas: Sequence[ArgMeta]) -> list[Signature]:
        shape, dtype = metas[self.arg]
        return [(DType.from_numpy(dtype), view_layout(Layout.contiguous(shape), self.views))]


@dataclass(frozen=True, eq=False)
class Const:
    """A block of concrete indices: part of the snapshot taken, checked and narrowed to the
    kernel's index dtype when the op was built (`graph.indices.Indices.concrete`)."""

    value: np.ndarray

    def arrays(self, args: Sequence[Any]) -> list[np.ndarray]:
        return [np.ascontiguousarray(self.value)]

    @property
    def axis_len(self) -> int:
        """0: the values were checked against their axis when the op was built."""
        return 0

    def values_of(self, args: Sequence[Any]) -> np.ndarray:
        """What the values come from (`kept_indices`): a block of the snapshot."""
        return self.value

    def moved(self, args: Sequence[Any], start: int) -> np.ndarray:
        """The indices each minus `start` (they stay in range): one copy (`indices.shifted`)."""
        return shifted(self.value, start)

    def signature(self, metas: Sequence[ArgMeta]) -> list[Signature]:
        return [(DType.from_numpy(self.value.dtype), Layout.contiguous(self.value.shape))]


@dataclass(frozen=True)
class LazyIndex:
    """Task argument `arg` holds lazy indices into an axis of `axis_len`, starting at `origin` in
    the whole index array: checked and narrowed here (`indices.checked_block`)."""

    arg: int
    axis_len: int
    origin: tuple[int, ...]  # global position of this index block, for messages

    def arrays(self, args: Sequence[Any]) -> list[np.ndarray]:
        return [checked_block(args[self.arg], self.axis_len, self.origin)]

    def values_of(self, args: Sequence[Any]) -> Any:
        """What the values come from (`kept_indices`): the task argument, unchecked."""
        return args[self.arg]

    def moved(self, args: Sequence[Any], start: int) -> np.ndarray:
        """The checked indices each minus `start` (they stay in range)."""
        return shifted(checked_block(args[self.arg], self.axis_len, self.origin), start)

    def signature(self, metas: Sequence[ArgMeta]) -> list[Signature]:
        return [(DType.from_numpy(kernel_dtype(self.axis_len)), Layout.contiguous(metas[self.arg][0]))]


@dataclass(frozen=True)
class Gathered:
    """A select's source along `axis`, read from the `parts` its indices hit, and the indices.

    `part_starts[i]` is where part i begins along `axis` in the select's source. Gives two program
    inputs: the source and the indices remapped into it (in their kernel dtype). The source is
    one part as it is; or, when the parts are views of one buffer laid out one after the other (chunks of
    `from_array`: the recipe then passes every chunk from the lowest to the highest hit), one
    spanning view over them (no copy, no look at the index values); else the parts the indices
    hit, concatenated.
    """

    parts: tuple[Part, ...]
    part_starts: tuple[int, ...]
    axis: int
    index: Const | LazyIndex
    spannable: bool = True  # False: the parts lie too far apart to span (`span.gap_allows`,
    # `span.span_is_cheap`); True: the recipe allowed the gap, so the span is taken whatever it is
    reach: int = 0  # at least the program source's extent along `axis` (0: the whole axis)
    # the last spanning view made, with weak references to the parts it spans (`_spanning`)
    _last_span: list = field(default_factory=list, compare=False, repr=False)

    @property
    def gap(self) -> int | None:
        """The gap `spanning_view` may span: any the recipe allowed (it decided before any chunk
        existed), or its own default rule without a reach."""
        return self.reach or None

    def arrays(self, args: Sequence[Any]) -> list[np.ndarray]:
        source, local = self._arrays(args)
        return [source, local if is_device_block(local) else self._narrowed(local)]

    def _narrowed(self, local: np.ndarray) -> np.ndarray:
        # positions into the program's source, which may index it in a narrower dtype than
        # the whole axis needs (a chunked axis past 2**32: U32, so Vulkan kernels can run it)
        return narrowed(local, self.reach, copy=False) if self.reach else local

    def _local(self, source: Any, args: Sequence[Any], start: int) -> Any:
        """The indices moved by `start` into `source` (one part, or a span from that start) and
        narrowed: kept on the source's device between computes where they cannot change
        (`kept_indices`: a snapshot's block, a resident index block), so they are uploaded once."""
        detail = (start, self.reach, self.index.axis_len)
        return kept_input(self.index.values_of(args), detail, source,
                          lambda: self._narrowed(self.index.moved(args, start)))

    def _arrays(self, args: Sequence[Any]) -> tuple[Any, Any]:
        chosen = [p.arrays(args)[0] for p in self.parts]  # views: free
        if len(chosen) == 1:
            return chosen[0], self._local(chosen[0], args, self.part_starts[0])
        span = self._spanning(chosen) if self.spannable else None
        if span is not None:
            return span, self._local(span, args, self.part_starts[0])
        one = self._one_hit(args)
        if one is not None:
            return chosen[one], self._local(chosen[one], args, self.part_starts[one])
        (idx,) = self.index.arrays(args)
        begin = np.asarray(self.part_starts, dtype=np.int64)
        ids = np.searchsorted(begin, idx, side="right") - 1
        used = np.unique(ids)
        chosen = [chosen[i] for i in used]
        if len(chosen) == 1:
            return chosen[0], shifted(idx, self.part_starts[int(used[0])])
        sizes = np.asarray([c.shape[self.axis] for c in chosen], dtype=np.int64)
        back = np.zeros(len(self.parts), dtype=idx.dtype)  # how far each used part moves down
        back[used] = begin[used] - np.concatenate(([0], np.cumsum(sizes)[:-1]))
        local = np.subtract(idx, back[ids], dtype=idx.dtype)  # in the indices' dtype: no wrap
        return joined(chosen, self.axis), local

    def _spanning(self, chosen: list[Any]) -> np.ndarray | None:
        """`spanning_view` of the parts `chosen`, made once while they are the same objects (a held
        graph's chunks, compute after compute: ~0.2 ms a block of W2's 16 chunks on the host);
        forgotten when one of them goes."""
        known = self._last_span[0] if self._last_span else None
        if known is not None and len(known[0]) == len(chosen) \
                and all(ref() is part for ref, part in zip(known[0], chosen)):
            return known[1]
        span = spanning_view(chosen, self.part_starts, self.axis, self.gap)
        box = self._last_span
        try:
            refs = tuple(weakref.ref(part, lambda _, box=box: box.clear()) for part in chosen)
        except TypeError:  # a part that takes no weak reference: not remembered
            return span
        box[:] = [(refs, span)]
        return span

    def _one_hit(self, args: Sequence[Any]) -> int | None:
        """The one part that lazy indices in device memory hit, remembered per index block (found
        by reading it once: `kept_indices.one_part`), or None (host indices, or several parts)."""
        origin = self.index.values_of(args)
        if not isinstance(self.index, LazyIndex) or not is_device_block(origin):
            return None

        def hit() -> int | None:
            (idx,) = self.index.arrays(args)
            ids = np.unique(np.searchsorted(np.asarray(self.part_starts, np.int64), idx, side="right") - 1)
            return int(ids[0]) if ids.size == 1 else None
        return one_part(origin, (self.part_starts, self.index.axis_len), hit)

    def signature(self, metas: Sequence[ArgMeta]) -> list[Signature]:
        (index,) = self.index.signature(metas)
        if self.reach:
            index = (DType.from_numpy(kernel_dtype(self.reach)), index[1])
        sigs = [p.signature(metas)[0] for p in self.parts]
        if len(sigs) == 1:
            return [sigs[0], index]
        shape = list(sigs[0][1].shape)
        shape[self.axis] = sum(s[1].shape[self.axis] for s in sigs)
        return [(sigs[0][0], Layout.contiguous(tuple(shape))), index]


@dataclass(frozen=True, eq=False)
class Assembled:
    """A select's source made of the pieces read for this block (see `graph.pieces`), and the
    order to take them in.

    `pieces[i] = (arg, j)`: piece j of the read task whose result is task argument `arg`. Gives
    two program inputs: the pieces concatenated along `axis` (one piece as it is), of `shape`
    (1-d for a gather's elements), and `perm` (the kernel index dtype), which a select along `axis` applies.
    """

    pieces: tuple[tuple[int, int], ...]
    axis: int
    perm: Const
    shape: tuple[int, ...]
    dtype: np.dtype

    def arrays(self, args: Sequence[Any]) -> list[np.ndarray]:
        got = [args[a][j] for a, j in self.pieces]
        return [joined(got, self.axis), self.perm.value]

    def signature(self, metas: Sequence[ArgMeta]) -> list[Signature]:
        return [(DType.from_numpy(self.dtype), Layout.contiguous(self.shape)),
                *self.perm.signature(metas)]


InputSpec = Part | Const | LazyIndex | Gathered | Assembled
