"""Move only what is touched: a select's source staged as just the rows its indices hit.

An index_select or gather over a host source reads its source as one array: a chunk, or a
spanning view over the chunks the block's indices hit (`task.Gathered`). A backend that copies
its inputs to a device then moves that whole span for every output block: a random gather of
128k rows out of a 512 MiB table ships the table once per block. The planner weighs two ways to
run such a block (`staged_where_cheaper`):

- the source as it is: free on the Cpu backend (numpy reads the rows in place), the whole span
  over the link on a device;
- the touched rows staged: the slabs along the select's axis that the indices hit, taken on the
  host into one contiguous array (`hostcopy.gather_rows`: threaded when large) at the cost of a
  host copy of those bytes (`Planner.host_copy_cost`), with the indices remapped into it; then
  only those rows cross the link.

Each way is planned over every allowed backend and the cheaper total wins, so the Cpu keeps
reading in place, and a device that is worth it (or is forced) gets the touched rows alone. The
staged source is no bigger than the touched rows, so a source larger than a device's largest
allocation (`maxMemoryAllocationSize`) runs there when its touched rows fit. The choice is
priced before the index values are looked at (the touched rows are at most the indices, at most
the span); the rows are found only for a block that stages, or for a gather with more positions
than the span has rows (its positions may hit few of them: they are counted first). A source
whose memory span is no larger than its touched rows would be (a broadcast: one base row) is
never staged.

Where the block's result is to stay in device memory (`persist(device=True)`,
`compute(device=True)`) and the block is one index_select along axis 0 of a C-contiguous host
array, a third way is priced (`streamed_where_cheaper`): the host gathers the result's rows
straight into page-locked staging in pieces, each uploaded into the result's device memory while
the next is gathered (`base.RowStreamer`, Vulkan's `streamed.gather_up`). It costs about the
larger of the host gather (`Planner.host_copy_cost` of the result) and the upload from
page-locked memory (`Planner.pinned_upload_cost`), plus the smaller spread over the pieces and a
submit a piece (`Streaming.cost`), against the best program with the result kept there (as it
is, or staged; a host program's result then pays a pageable upload). No host array of the
result is made, and no source bytes but the touched rows are read, so a table larger than the
device's largest allocation works.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lazyfuel.backends.base import RowReader, RowStreamer
from lazyfuel.contracts.model import Backend
from lazyfuel.dtypes import DType
from lazyfuel.graph.indices import kernel_dtype, narrowed
from lazyfuel.hostcopy import gather_rows
from lazyfuel.layout import Layout
from lazyfuel.planner import Chain, OpNode, Planner, Program
from lazyfuel.planner.explain import seconds
from lazyfuel.planner.placement import Placement
from lazyfuel.settings import config

SELECTS = ("IndexSelect", "Gather")


def touched_rows(positions: np.ndarray, extent: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct positions (0 <= p < `extent`) in `positions`, in increasing order, and each
    position's place among them (the shape of `positions`, in the kernels' index dtype)."""
    flat = positions.reshape(-1)
    if flat.size * 16 < extent:  # few positions into a long axis: sort them
        rows, inverse = np.unique(flat, return_inverse=True)
    else:  # one pass over the axis
        hit = np.zeros(extent, dtype=bool)
        hit[flat] = True
        rows = np.flatnonzero(hit)
        inverse = (np.cumsum(hit, dtype=np.int64) - 1)[flat]
    return rows, narrowed(inverse.reshape(positions.shape), max(rows.size, 1), copy=False)


def stageable(chain: Chain, source: int, axis: int) -> bool:
    """Whether chain input `source` (and `source + 1`, its indices) is read by one select along
    `axis` and by nothing else: then it may be replaced by the rows the indices touch."""
    users = [n for n in chain.nodes if source in n.args or source + 1 in n.args]
    if len(users) != 1 or users[0].op not in SELECTS or users[0].args[:2] != (source, source + 1):
        return False
    return chain.n_inputs > source + 1 and source not in chain.outputs and _dim(users[0]) == axis


def _reader(chain: Chain, source: int) -> OpNode:
    """The one node of `chain` that reads input `source` (`stageable` holds)."""
    return next(n for n in chain.nodes if source in n.args)


def _dim(node: OpNode) -> int | None:
    dim = dict(node.attr).get("dim")
    return dim if isinstance(dim, int) and dim >= 0 else None


@dataclass(frozen=True)
class Staging:
    """The planner's two ways to run a block whose input `source` may be staged: `as_is` (the
    source as given) and `staged` (on `rows` touched rows), plus the host copy that stages them."""

    as_is: Program
    staged: Program
    copy_s: float
    rows: int

    @property
    def pays(self) -> bool:
        """Whether staging costs less in all."""
        return self.staged.cost + self.copy_s < self.as_is.cost


def priced(planner: Planner, chain: Chain, dtypes: Sequence[DType], layouts: Sequence[Layout],
           source: int, rows: int, placement: Placement | None = None) -> Staging:
    """Both plans of a block (signature `dtypes`, `layouts`; `placement` where its inputs are and
    its result is wanted, None: host memory) whose input `source` is a select's source along the
    select's axis, of which `rows` would be staged."""
    as_is = planner.plan(chain, dtypes, layouts, placement)
    axis = _dim(_reader(chain, source))
    shape = list(layouts[source].shape)
    shape[axis] = rows
    dtypes, layouts = list(dtypes), list(layouts)
    layouts[source] = Layout.contiguous(tuple(shape))
    dtypes[source + 1] = DType.from_numpy(kernel_dtype(rows))
    staged = planner.plan(chain, dtypes, layouts, placement)
    return Staging(as_is, staged, planner.host_copy_cost(dtypes[source], shape), rows)


def shrinks(layout: Layout, axis: int, rows: int) -> bool:
    """Whether `rows` slabs along `axis` of a source of `layout`, made contiguous, are fewer than
    its rows and take fewer elements than its memory span (a broadcast or strided view may span
    less than its touched rows would fill: then it is sent as it is)."""
    extent = layout.shape[axis]
    return 0 < extent and rows < extent and rows * (math.prod(layout.shape) // extent) < layout.span


def row_bound(chain: Chain, source: int, axis: int, layout: Layout, n_positions: int) -> int:
    """How many rows staging input `source` (of `layout`) may take before the index values are
    looked at (at most the positions, at most the axis), or 0 where it cannot be staged or that
    many rows would not shrink it."""
    if not layout.shape or not stageable(chain, source, axis):
        return 0
    bound = min(n_positions, layout.shape[axis])
    return bound if shrinks(layout, axis, bound) else 0


def staged_where_cheaper(planner: Planner, chain: Chain, inputs: list, source: int,
                         axis: int) -> list:
    """`inputs` with input `source` staged as the rows its indices (input `source + 1`) touch and
    the indices remapped, where that costs less in all (see the module docstring); else as given."""
    data, positions = inputs[source], inputs[source + 1]
    if not isinstance(data, np.ndarray) or not isinstance(positions, np.ndarray):
        return inputs
    layout = Layout.of(data)
    if not layout.shape or not stageable(chain, source, axis):
        return inputs
    extent, found = data.shape[axis], None
    bound = min(positions.size, extent)
    if not shrinks(layout, axis, bound) and _reader(chain, source).op == "Gather":
        found = touched_rows(positions, extent)  # a gather's many positions may hit few rows
        bound = found[0].size
    if not shrinks(layout, axis, bound):
        return inputs
    dtypes = [DType.from_numpy(a.dtype) for a in inputs]
    layouts = [layout if i == source else Layout.of(a) for i, a in enumerate(inputs)]
    if not priced(planner, chain, dtypes, layouts, source, bound).pays:
        return inputs
    rows, remapped = found if found is not None else touched_rows(positions, extent)
    out = list(inputs)
    out[source], out[source + 1] = gather_rows(data, rows, axis), remapped
    return out


@dataclass(frozen=True)
class Streaming:
    """The price of gathering a block's result rows on the host into page-locked staging, piece by
    piece, each piece uploaded while the next is gathered (see the module docstring)."""

    gather_s: float  # the host gather of every result row
    up_s: float  # their upload from page-locked memory, a submit a piece included
    pieces: int
    nbytes: int  # the result's bytes, all of which go up

    @property
    def cost(self) -> float:
        """Seconds in all: the slower side, plus the faster side's first piece (nothing overlaps it)."""
        return max(self.gather_s, self.up_s) + min(self.gather_s, self.up_s) / max(self.pieces, 1)

    def describe(self, backend: Backend) -> str:
        """The way in `lf.explain`'s words."""
        return (f"gathered on the host into page-locked staging, {self.pieces} piece(s) uploaded to "
                f"{backend} as the next is gathered (~{seconds(self.cost)}: gather "
                f"~{seconds(self.gather_s)}, up ~{seconds(self.up_s)}; {self.nbytes} bytes up, none down)")


def streamable(chain: Chain, layouts: Sequence[Layout]) -> bool:
    """Whether a block of `chain` over inputs of `layouts` is one index_select along axis 0 of a
    C-contiguous source of rank >= 1 (input 0) by 1-d indices (input 1), returned as it is."""
    if chain.n_inputs != 2 or len(chain.nodes) != 1 or chain.outputs != (2,) or len(layouts) != 2:
        return False
    node = chain.nodes[0]
    source = layouts[0]
    return (node.op == "IndexSelect" and node.args == (0, 1) and _dim(node) == 0 and bool(source.shape)
            and len(layouts[1].shape) == 1 and source == Layout.contiguous(source.shape))


def streaming(planner: Planner, backend: Backend, streamer: RowStreamer, dtype: DType,
              shape: Sequence[int]) -> Streaming:
    """The price of streaming a result of `dtype` and `shape` (rows along axis 0) up to `backend`
    through `streamer`."""
    row_bytes = math.prod(shape[1:]) * dtype.itemsize
    nbytes = shape[0] * row_bytes
    pieces = streamer.pieces(nbytes, row_bytes)
    return Streaming(planner.host_copy_cost(dtype, shape),
                     planner.pinned_upload_cost(backend, nbytes, max(pieces, 1)), pieces, nbytes)


def kept_cost(planner: Planner, chain: Chain, dtypes: Sequence[DType], layouts: Sequence[Layout],
              backend: Backend, n_positions: int) -> tuple[float, Program]:
    """The cheapest program of the block with its result kept on `backend` (its source as it is,
    or staged where that pays) and its cost with the staging copy."""
    placement = Placement.of([None] * len(layouts), backend)
    bound = row_bound(chain, 0, 0, layouts[0], n_positions)
    if bound:
        st = priced(planner, chain, dtypes, layouts, 0, bound, placement)
        return (st.staged.cost + st.copy_s, st.staged) if st.pays else (st.as_is.cost, st.as_is)
    program = planner.plan(chain, dtypes, layouts, placement)
    return program.cost, program


@dataclass(frozen=True)
class InPlace:
    """The price of a kernel reading a block's result rows from the host table where it lies (its
    pages imported, `base.RowReader`) straight into the result's device memory
    (`Planner.host_read_cost`: the slower of the link and the kernel)."""

    warm: float  # seconds once the table is kept imported (a submit included)
    import_s: float  # pinning the table's pages not kept imported yet
    nbytes: int  # the result's bytes, read over the link once
    imported: int  # the table's bytes imported now

    @property
    def cost(self) -> float:
        """Seconds this compute: the import, then the read."""
        return self.import_s + self.warm

    def describe(self, backend: Backend) -> str:
        """The way in `lf.explain`'s words."""
        pin = f"import {self.imported} bytes ~{seconds(self.import_s)} once, then " if self.imported else ""
        return (f"read by a kernel on {backend} from the host table's imported pages "
                f"(~{seconds(self.cost)}: {pin}read ~{seconds(self.warm)}; {self.nbytes} bytes over the "
                "link, none down)")


def in_place(planner: Planner, backend: Backend, dtype: DType, shape: Sequence[int],
             imported: int) -> InPlace:
    """The price of reading a result of `dtype` and `shape` (rows along axis 0) in place on
    `backend`, importing `imported` bytes of its table first."""
    row_bytes = math.prod(shape[1:]) * dtype.itemsize
    nbytes = shape[0] * row_bytes
    read = planner.host_read_cost(backend, nbytes, row_bytes)
    pin = planner.host_read_cost(backend, nbytes, row_bytes, imported) - read  # the import alone
    return InPlace(read, pin, nbytes, imported)


@dataclass(frozen=True)
class KeptWays:
    """The ways a `streamable` block kept on a device may take: its best program (`kept_cost`),
    its rows streamed up, and (where the device's executor is a `base.RowReader`) read in place."""

    program_s: float
    program: Program
    streamed: Streaming
    read: InPlace | None

    def pick(self, reused: bool = False) -> str:
        """"in-place", "streamed" or "program": `config.host_rows` where it forces a way that can
        run, else the cheapest, where the in-place read counts its import as paid once the table
        is `reused` (a block of it was streamed before: decision 116)."""
        forced = config.host_rows
        if forced == "in-place" and self.read is not None:
            return "in-place"
        if forced == "streamed":
            return "streamed"
        other = min(self.program_s, self.streamed.cost)
        if self.read is not None and (self.read.cost < other or (self.read.warm < other and reused)):
            return "in-place"
        return "streamed" if self.streamed.cost < self.program_s else "program"


def kept_ways(planner: Planner, chain: Chain, dtypes: Sequence[DType], layouts: Sequence[Layout],
              backend: Backend, streamer: RowStreamer, imported: int | None) -> KeptWays:
    """The prices of a `streamable` block's ways with its result kept on `backend`; `imported`:
    the table's bytes a read in place would import now (None: it cannot be read in place).
    Priced once per signature and planner (`_PRICED`: W2's blocks of one graph are alike, and
    pricing each took 0.4-0.8 ms of the host before its read was submitted, under the GIL), while
    the planner's registry and pinned kernels stay, as `Planner.plan` caches its programs."""
    shape = (layouts[1].shape[0], *layouts[0].shape[1:])
    row_bytes = math.prod(shape[1:]) * dtypes[0].itemsize
    pieces = streamer.pieces(shape[0] * row_bytes, row_bytes)
    key = (chain, tuple(dtypes), tuple(layouts), backend, pieces, imported, len(planner.registry),
           frozenset(config.pin_kernels))
    with _PRICED_LOCK:
        known = _PRICED.setdefault(planner, OrderedDict())
        found = known.get(key)
        if found is not None:
            known.move_to_end(key)
            return found
    best, program = kept_cost(planner, chain, dtypes, layouts, backend, math.prod(layouts[1].shape))
    stream = streaming(planner, backend, streamer, dtypes[0], shape)
    read = None if imported is None else in_place(planner, backend, dtypes[0], shape, imported)
    ways = KeptWays(best, program, stream, read)
    with _PRICED_LOCK:
        known[key] = ways
        while len(known) > PRICED_SIZE:
            known.popitem(last=False)
    return ways


PRICED_SIZE = 64  # signatures priced per planner, least recently used dropped first
_PRICED: weakref.WeakKeyDictionary[Planner, OrderedDict[tuple, KeptWays]] = weakref.WeakKeyDictionary()
_PRICED_LOCK = threading.Lock()


def streamed_where_cheaper(planner: Planner, chain: Chain, inputs: Sequence[object], backend: Backend,
                           streamer: RowStreamer, into: object | None = None) -> object | None:
    """The block's result as a device block of `backend` where the block is `streamable` and a way
    without a program costs less than `kept_cost`'s program (`KeptWays.pick`): its rows read in
    place by a kernel (`base.RowReader.gather_in_place`, where `streamer` is one; into `into`, the
    block's part of the compute's one result allocation, where given and of the result's shape:
    `graph/placed.py`) or gathered on the host straight into it (`streamer.gather_up`, into `into`
    likewise); else None (run the program)."""
    data, positions = inputs[0], inputs[1] if len(inputs) > 1 else None
    if not isinstance(data, np.ndarray) or not isinstance(positions, np.ndarray):
        return None
    layouts = [Layout.of(data), Layout.of(positions)]
    if not data.flags.c_contiguous or not streamable(chain, layouts):
        return None
    dtypes = [DType.from_numpy(data.dtype), DType.from_numpy(positions.dtype)]
    reader = streamer if isinstance(streamer, RowReader) else None
    ways = kept_ways(planner, chain, dtypes, layouts, backend, streamer,
                     None if reader is None else reader.unkept_bytes(data))
    importing = reader is not None and ways.read is not None and ways.read.imported
    way = ways.pick(reader.streamed_before(data) if importing else False)
    shape = (len(positions), *data.shape[1:])
    into = into if getattr(into, "shape", None) == shape else None
    if way == "in-place" and reader is not None:
        block = reader.gather_in_place(data, positions, checked=True, into=into)  # a task's inputs: in range
        if block is not None:
            return block
        way = "streamed" if ways.streamed.cost < ways.program_s or config.host_rows != "auto" else "program"
    if way != "streamed":
        return None
    block = streamer.gather_up(data, positions, into=into)
    if importing:  # streamed once: asked for again, the table is imported
        reader.streamed_before(data, mark=True)
    return block
