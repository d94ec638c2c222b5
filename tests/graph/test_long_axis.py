"""An axis past 2**32 positions (issue 15 item 5): no valid index is refused. Such a select takes
I64 indices (`graph.indices.kernel_dtype`), which the planner runs on the Cpu kernels bound for
them, except in a program whose source (the chunks its indices hit) is short enough for U32;
U32 stays the index dtype everywhere else.

The long axis is one array of 2**32 + 16 uint8 zeros with a few values written: its pages are
never touched except where written, so the test holds a few MiB, not 4 GiB."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel.graph.indices import kernel_dtype
from lazyfuel.providers import available_backends

BACKENDS = [b.name.lower() for b in available_backends() if b.name in ("Cpu", "Vulkan")]
N = 2**32 + 16
WRITTEN = np.array([0, 5, 2**31, 2**32 - 1, 2**32, 2**32 + 15])
PICK = np.array([2**32 + 15, 5, 2**32 - 1, 2**32, 0, 2**31, 7, 2**32])


@pytest.fixture(scope="module")
def long_axis() -> np.ndarray:
    a = np.zeros(N, np.uint8)
    a[WRITTEN] = np.arange(1, len(WRITTEN) + 1, dtype=np.uint8)
    return a


def test_the_index_dtype_widens_only_past_2_to_the_32():
    assert kernel_dtype(10) == kernel_dtype(2**32) == np.uint32
    assert kernel_dtype(2**32 + 1) == np.int64


@pytest.mark.parametrize("chunks", [2**30, N], ids=["chunks-of-2**30", "one-chunk"])
@pytest.mark.parametrize("given", [np.int64, np.uint64, list, "dask"])
def test_indices_past_2_to_the_32_select_and_gather_as_numpy(long_axis, bits_equal, chunks, given):
    x = lf.from_array(long_axis, chunks=chunks)
    idx = {list: PICK.tolist(), "dask": da.from_array(PICK, chunks=3)}.get(given)
    idx = PICK.astype(given) if idx is None else idx
    want = long_axis[PICK]
    bits_equal(lf.index_select(x, 0, idx).compute(), want)
    bits_equal(lf.gather(x, 0, idx).compute(), want)


def test_the_plan_says_i64_indices_on_the_cpu(long_axis):
    plan = lf.explain(lf.index_select(lf.from_array(long_axis, chunks=N), 0, PICK))
    assert "(IndexSelect,[U8,I64,U8],Cpu)" in plan, plan


def test_an_index_past_the_long_axis_names_the_axis(long_axis):
    x = lf.from_array(long_axis, chunks=2**30)
    with pytest.raises(IndexError, match=rf"^index {N} at position 1 is out of range; "
                                         rf"expected 0 <= index < {N}$"):
        lf.index_select(x, 0, np.array([2**32, N]))
    with pytest.raises(IndexError, match=rf"^index -1 at position 2 is negative; expected 0 <= index < {N}"):
        lf.gather(x, 0, da.from_array(np.array([2**32, 3, -1]), chunks=2)).compute()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_chunked_long_axis_indexes_each_program_in_u32(monkeypatch, long_axis, bits_equal, backend):
    """Chunks of 2**24: each program's source is the chunks its indices hit, so the positions
    into it fit U32 and every backend runs it (Vulkan too), though the axis needs I64."""
    monkeypatch.setenv("LAZYFUEL_BACKEND", backend)
    x = lf.from_array(long_axis, chunks=2**24)
    idx = np.array([2**32 + 15, 5, 2**32, 0])
    y = lf.index_select(x, 0, idx)
    assert "U8,U32,U8" in lf.explain(y)
    bits_equal(y.compute(), long_axis[idx])
    bits_equal(lf.gather(x, 0, idx).compute(), long_axis[idx])
    if backend == "cpu":  # lazy indices may hit any chunk: their program spans the whole axis (I64)
        bits_equal(lf.gather(x, 0, da.from_array(idx, chunks=2)).compute(), long_axis[idx])
