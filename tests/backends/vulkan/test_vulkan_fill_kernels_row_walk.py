"""select_fill's row walk (`SelectFillKernel(row_walk=True)`, shaders/select_fill.comp's ROW_WALK
and MASK_BY_ROW; issue 18, W3): each invocation divides once and carries row, index position and
outer forward, and reads a mask that is the same over each output row (a
row mask (N, 1)) by row. Bit-equal to numpy and to the general path on poisoned outputs, for
every element width (1-16 bytes), rows of 1 to 256 words (R not a power of two, not a multiple
of the words per invocation), n_idx not a multiple of anything and below the step, outer > 1,
uneven last tiles, (N, 1) / (1, C) / (1, 1) / dense masks, both mappings (lavapipe's and a GPU's)
and several launch shapes; a bad index still reports its value and position."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from vulkan_helpers import random_array

from lazyfuel.backends.vulkan.fill_kernels import SelectFillKernel
from lazyfuel.backends.vulkan.kernels import DeviceValue, StatusSlot
from lazyfuel.backends.vulkan.mask_reading import PER_WORD, MaskReading, by_rows, mask_reading
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout, broadcast_to

pytestmark = pytest.mark.usefixtures("mapping")  # CPU (sequential) and GPU (coalesced) mappings

WIDTHS = {1: DType.U8, 2: DType.F16, 4: DType.F32, 8: DType.F64, 16: DType.C128}
NO_BAD = 0xFFFFFFFF


@dataclass
class _Step:
    """What SelectFillKernel.record reads from a planner Step."""

    param: dict[str, Any]
    out_shape: tuple[int, ...]


def select_fill(pool, x: np.ndarray, dim: int, idx: np.ndarray, small: np.ndarray, fill: bytes,
                row_walk: bool, shape: tuple[int, int] | None = None,
                **switches: bool) -> tuple[np.ndarray, int]:
    """Record select_fill by hand on the pool (`shape`: masked_fill's launch shape for it;
    `switches`: SelectFillKernel's others), the output poisoned; (the output, the status word).
    The mask is `small` broadcast to the output's shape, read in place (only its own bytes on the
    device)."""
    outer, n_idx = math.prod(x.shape[:dim]), idx.size
    out_shape = (*x.shape[:dim], n_idx, *x.shape[dim + 1:])
    step = _Step({"outer_count": outer, "source_dim_size": x.shape[dim], "n_indices": n_idx,
                  "inner_count": math.prod(x.shape[dim + 1:]), "fill_bytes": fill}, out_shape)
    saved = pool.groups["masked_fill"]
    if shape is not None:
        pool.groups["masked_fill"] = shape
    try:
        with pool.batch() as batch:
            src, ids, mbuf = (batch.alloc(max(a.nbytes, 16)) for a in (x, idx, small))
            out = batch.alloc(-(-math.prod(out_shape) * x.itemsize // 16) * 16)
            status = batch.alloc(16)
            for alloc, a in ((src, x), (ids, idx), (mbuf, small)):
                batch.upload(alloc, np.ascontiguousarray(a).reshape(-1).view(np.uint8))
            batch.recorder.fill(out.buffer, out.offset, out.size, 0xA5A5A5A5)
            batch.fill_u32(status, NO_BAD, 4)
            layout = broadcast_to(Layout.of(small), out_shape)
            args = [DeviceValue(src, DType.from_numpy(x.dtype), Layout.of(x)),
                    DeviceValue(ids, DType.U32, Layout.of(idx)), DeviceValue(mbuf, DType.BOOL, layout)]
            kernel = SelectFillKernel(row_walk=row_walk, **switches)
            kernel.record(batch, step, args, out, StatusSlot(status, 0))
            batch.barrier()
            got = np.empty(out_shape, x.dtype)
            word = np.empty(1, np.uint32)
            batch.download(out, got)
            batch.download(status, word)
            batch.run()
    finally:
        pool.groups["masked_fill"] = saved
    return got, int(word[0])


def expected(x: np.ndarray, dim: int, idx: np.ndarray, mask: np.ndarray, fill: bytes) -> np.ndarray:
    width = x.dtype.itemsize
    picked = np.take(x.view(f"V{width}"), idx.astype(np.int64), axis=dim)
    mask = np.broadcast_to(mask, picked.shape)
    return np.where(mask, np.frombuffer(fill, f"V{width}")[0], picked).view(x.dtype)


def case(seed: int, width: int, outer: int, dim_size: int, row_words: int, n_idx: int, kind: str):
    """Random x (outer, dim_size, row) of `width`-byte elements, indices, a mask of `kind` (its
    small array, broadcast over the output), a fill."""
    rng = np.random.default_rng(seed)
    dtype = WIDTHS[width]
    cols = row_words * 16 // width
    x = random_array(rng, dtype, (outer, dim_size, cols))
    idx = rng.integers(0, dim_size, n_idx).astype(np.uint32)
    shape = (outer, n_idx, cols)
    small = {"row": (outer, n_idx, 1), "column": (1, 1, cols), "one": (1, 1, 1), "dense": shape,
             "outer": (outer, 1, 1)}[kind]
    mask = rng.random(small) < 0.5
    return x, idx, mask, random_array(rng, dtype, (1,)).tobytes()


KINDS = ("row", "column", "one", "dense", "outer")
# (row_walk, the other switches): the walk with its loads in passes (a row mask's bytes read by
# the workgroup at once or by each position) and in turn (whatever the mapping), filled words
# read or not, and the general path
VARIANTS = ((True, {"loads_first": True}), (True, {"loads_first": True, "mask_tile": False}),
            (True, {"loads_first": False}),
            (True, {"loads_first": True, "skip_filled": False}),
            (True, {"loads_first": False, "skip_filled": False}), (False, {}),
            (False, {"skip_filled": False}))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("row_words", [1, 3, 4, 5, 64, 65, 256], ids=lambda r: f"{16 * r}B-rows")
@pytest.mark.parametrize("width", WIDTHS, ids=lambda w: f"w{w}")
def test_bit_equal_to_numpy_and_the_general_path(pool, width, row_words, kind):
    x, idx, mask, fill = case(width * 1000 + row_words, width, 2, 9, row_words, 13, kind)
    want = expected(x, 1, idx, mask, fill)
    for walk, switches in VARIANTS:
        got, status = select_fill(pool, x, 1, idx, mask, fill, walk, **switches)
        assert status == NO_BAD
        assert got.tobytes() == want.tobytes(), f"row_walk={walk} {switches}"


@pytest.mark.parametrize("shape", [(64, 4), (16, 8), (7, 4), (256, 16), (1, 4)],
                         ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("n_idx", [1, 2, 3, 37])
def test_steps_across_many_rows_and_short_index_lists(pool, shape, n_idx):
    """Steps of a whole workgroup (coalesced) cross step / R rows at once and, with n_idx below
    that, several outers: the carries' loops; uneven last tiles (outputs not a multiple of a tile)."""
    x, idx, mask, fill = case(n_idx, 4, 5, 4, 1, n_idx, "row")
    got, status = select_fill(pool, x, 1, idx, mask, fill, True, shape)
    assert status == NO_BAD
    assert got.tobytes() == expected(x, 1, idx, mask, fill).tobytes()


@pytest.mark.parametrize(("walk", "switches"), VARIANTS, ids=str)
def test_a_bad_index_reports_its_first_position_and_writes_nothing_there(pool, walk, switches):
    x, idx, mask, fill = case(5, 4, 1, 10, 3, 40, "row")
    idx[[7, 31]] = [10, 12]
    got, status = select_fill(pool, x, 1, idx, mask, fill, walk, **switches)
    assert status == 7
    good = np.ones(40, bool)
    good[[7, 31]] = False
    assert got[:, good].tobytes() == expected(x, 1, idx[good], mask[:, good], fill).tobytes()
    assert (got[:, ~good].view(np.uint8) == 0xA5).all()


def test_the_executor_names_the_bad_value_and_position(executor):
    """Through a program (select_fill_broadcast, the row walk): IndexError naming value and position."""
    from test_vulkan_fill_kernels import select_fill_program

    x, idx, mask, fill = case(6, 4, 1, 10, 3, 40, "row")
    x, mask = x[0], np.broadcast_to(mask[0], (40, x.shape[2]))
    idx[11] = 99
    with pytest.raises(IndexError, match=r"index 99 at position 11 .*axis of size 10"):
        executor.run(select_fill_program(x, idx, mask, fill, 0), [x, idx, mask])


def test_a_row_mask_is_read_by_row_and_a_column_mask_is_not():
    """`by_rows`: the (N, 1) mask's run counted in rows (no division left: inner and outer dense);
    an outer-only mask's in rows of rows; a column mask repeats inside a row: None."""
    row = mask_reading(Layout((6, 8), (1, 0), 0), 4)
    assert by_rows(row, 8) == MaskReading(PER_WORD, ((1, 6),), inner_dense=True, outer_dense=True)
    outer = mask_reading(Layout((2, 3, 8), (1, 0, 0), 0), 4)
    assert by_rows(outer, 8) == MaskReading(PER_WORD, ((3, 2),), inner_dense=False, outer_dense=True)
    assert by_rows(mask_reading(Layout((6, 8), (0, 1), 0), 4), 8) is None
    assert by_rows(mask_reading(Layout((6, 8), (8, 1), 0), 4), 8) is None  # dense: read by word


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(width=st.sampled_from(sorted(WIDTHS)), outer=st.integers(1, 3), dim_size=st.integers(1, 9),
       row_words=st.integers(1, 70), n_idx=st.integers(1, 50), kind=st.sampled_from(KINDS),
       shape=st.sampled_from([None, (64, 4), (5, 8), (32, 12)]), seed=st.integers(0, 2**16),
       passes=st.booleans(), tile=st.booleans())
def test_any_shape_is_bit_equal_to_numpy(pool, width, outer, dim_size, row_words, n_idx, kind, shape, seed,
                                         passes, tile):
    x, idx, mask, fill = case(seed, width, outer, dim_size, row_words, n_idx, kind)
    got, status = select_fill(pool, x, 1, idx, mask, fill, True, shape, loads_first=passes, mask_tile=tile)
    assert status == NO_BAD
    assert got.tobytes() == expected(x, 1, idx, mask, fill).tobytes()


def test_through_the_api_with_an_uneven_last_block_and_a_row_mask(pool):
    """The lazy chain pinned to select_fill (lavapipe's planner would take the pair): blocks of 7
    rows over 30 (the last of 2), a host (N, 1) mask read in place, bit-equal to numpy."""
    import lazyfuel as lf
    from lazyfuel import profiling

    rng = np.random.default_rng(30)
    x = random_array(rng, DType.F32, (30, 20))
    idx = rng.integers(0, 30, 30)
    mask = rng.random((30, 1)) < 0.5
    y = lf.from_array(x, chunks=(7, 20)).index_select(0, idx).masked_fill(mask, -1.0)
    with lf.config(pin_kernels=("select_fill", "select_fill_broadcast")), profiling.profile() as p:
        got = y.compute(backend="vulkan")
    assert got.tobytes() == np.where(mask, np.float32(-1), x[idx]).tobytes()
    assert {name.split(" -> ")[-1] for name in p.bindings} == {"lazyfuel::vulkan::select_fill_broadcast_f32"}
