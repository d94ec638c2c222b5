"""Views stay views on every backend (issue 16, case 7): picking a few elements from a huge view
reads those elements, not the view.

Two elements of a 10^6 x 10^6 `broadcast_to` view grew to 24 GB on the Cpu backend (the masked_fill
ran on the whole chunk, then the pick was a numpy view of its result), and an index_select of
such a view raised `MemoryError ... 3.64 TiB` (np.take copies a source that is not contiguous
whole). Each case here is bounded by tracemalloc's peak (Python's and numpy's allocations), not
by the clock, and is bit-equal to numpy.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import dask.array as da
import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel.backends.cpu.kernels import index_select_step
from lazyfuel.graph.task import raveled

N = 10**6
RNG = np.random.default_rng(16)
BASE = RNG.standard_normal(N).astype(np.float32)
MASK = RNG.random(N) < 0.5
DENSE = RNG.standard_normal((1024, 1536)).astype(np.float32)  # 6 MiB: views of it are read in part
DENSE_MASK = RNG.random(DENSE.shape) < 0.5
LIMIT = 2 * 2**20  # peak bytes allowed for a pick (the inputs above are allocated before)


def _huge() -> tuple[lf.Array, lf.Array, np.ndarray, np.ndarray]:
    """A 10^6 x 10^6 broadcast view of data and of a mask (lazyfuel and numpy)."""
    shape = (N, N)
    return (lf.broadcast_to(lf.from_array(BASE), shape), lf.broadcast_to(lf.from_array(MASK), shape),
            np.broadcast_to(BASE, shape), np.broadcast_to(MASK, shape))


def _filled(data: np.ndarray, mask: np.ndarray, value: float) -> np.ndarray:
    return np.where(mask, np.float32(value), data)


def _cases() -> dict[str, tuple[Callable[[], lf.Array], Callable[[], np.ndarray]]]:
    x, m, xn, mn = _huge()
    idx = np.array([7, 0, N - 1, 3])
    t, tm = lf.from_array(DENSE).T[::-3, 5::2], lf.from_array(DENSE_MASK).T[::-3, 5::2]
    tn, tmn = DENSE.T[::-3, 5::2], DENSE_MASK.T[::-3, 5::2]
    cube = lf.broadcast_to(lf.from_array(BASE[:100]), (10**4, 10**4, 100))
    cuben = np.broadcast_to(BASE[:100], (10**4, 10**4, 100))
    return {
        "masked_fill[:1, :2]": (lambda: lf.masked_fill(x, m, -1.0)[:1, :2],
                                lambda: _filled(xn[:1, :2], mn[:1, :2], -1.0)),
        "masked_fill.T[5, ::-250000]": (lambda: lf.masked_fill(x, m, 2.0).T[5, ::-250000],
                                        lambda: _filled(xn.T[5, ::-250000], mn.T[5, ::-250000], 2.0)),
        "contiguous[-3:, 4]": (lambda: lf.contiguous(x)[-3:, 4], lambda: xn[-3:, 4]),
        "index_select rows[:, :3]": (lambda: x.index_select(0, idx)[:, :3], lambda: xn[idx][:, :3]),
        "index_select cols[::400000]": (lambda: x.index_select(1, idx)[::400000],
                                        lambda: xn[::400000][:, idx]),
        "index_select of a transposed view": (lambda: x.T.index_select(0, idx)[1, 9:12],
                                              lambda: xn.T[idx][1, 9:12]),
        "gather[:2]": (lambda: x.gather(1, np.tile(idx, (N, 1)))[:2],
                       lambda: np.take_along_axis(xn[:2], np.tile(idx, (2, 1)), axis=1)),
        "masked_fill of an index_select[3]": (
            lambda: lf.masked_fill(x.index_select(1, idx), m.index_select(1, idx), 0.5)[3],
            lambda: _filled(xn[3, idx], mn[3, idx], 0.5)),
        "cube index_select[0, :2]": (lambda: cube.index_select(0, np.array([5]))[0, :2],
                                     lambda: cuben[5, :2]),
        "strided transposed masked_fill[:4, -2:]": (lambda: lf.masked_fill(t, tm, 0.0)[:4, -2:],
                                                    lambda: _filled(tn[:4, -2:], tmn[:4, -2:], 0.0)),
    }


def _peak(run: Callable[[], np.ndarray]) -> tuple[np.ndarray, int]:
    tracemalloc.start()
    try:
        out = run()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("case", list(_cases()))
def test_a_pick_from_a_huge_view_reads_only_what_it_picks(case: str, every_backend: str,
                                                          bits_equal) -> None:
    build, reference = _cases()[case]
    want = np.ascontiguousarray(reference())
    y = build()
    y.compute()  # the first compute of a process builds registries, planners and pools
    got, peak = _peak(y.compute)
    bits_equal(got, want)
    assert peak < LIMIT + 3 * want.nbytes, f"{case} on {every_backend}: peak {peak / 2**20:.1f} MiB"


def test_index_select_step_does_not_copy_a_view_it_reads() -> None:
    """The numpy kernel itself, on a 10^6 x 10^6 broadcast (np.take would copy all 3.64 TiB) and
    on a 3-d broadcast whose [outer, dim, inner] reshape is no view."""
    x = np.broadcast_to(BASE, (N, N))
    idx = np.array([3, 1], np.uint32)
    got, peak = _peak(lambda: index_select_step(x, idx, outer_count=N, source_dim_size=N, n_indices=2,
                                                inner_count=1))
    np.testing.assert_array_equal(got.reshape(N, 2), x[:, [3, 1]])
    assert peak < 4 * got.nbytes
    cube = np.broadcast_to(BASE[:100], (10**4, 10**4, 100))
    got, peak = _peak(lambda: index_select_step(cube, idx, outer_count=1, source_dim_size=10**4,
                                                n_indices=2, inner_count=10**6))
    np.testing.assert_array_equal(got.reshape(2, 10**4, 100), cube[[3, 1]])
    assert peak < 4 * got.nbytes
    out = np.empty((2, 10**4, 100), np.float32)
    assert index_select_step(cube, idx, outer_count=1, source_dim_size=10**4, n_indices=2,
                             inner_count=10**6, out=out) is out
    np.testing.assert_array_equal(out, cube[[3, 1]])


@pytest.mark.parametrize("case", ["rfft[3:5]", "fft(x.T, axis=0)[:, 7]", "ifft[5, 1:4]"])
def test_a_pick_of_an_fft_of_a_huge_view_transforms_only_the_picked_rows(case: str,
                                                                       every_backend: str) -> None:
    if every_backend == "vulkan":
        pytest.skip("the Vulkan backend has no FFT bindings")
    rows = np.broadcast_to(BASE[:256], (N, 256))
    build, want = {
        "rfft[3:5]": (lambda x: lf.rfft(x)[3:5], np.fft.rfft(rows[3:5])),
        "fft(x.T, axis=0)[:, 7]": (lambda x: lf.fft(x.T, axis=0)[:, 7], np.fft.fft(rows[7])),
        "ifft[5, 1:4]": (lambda x: lf.ifft(x)[5, 1:4], np.fft.ifft(rows[5])[1:4]),
    }[case]
    y = build(lf.broadcast_to(lf.from_array(BASE[:256]), rows.shape))
    y.compute()
    got, peak = _peak(y.compute)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    assert peak < LIMIT, f"{case} on {every_backend}: peak {peak / 2**20:.1f} MiB"


@pytest.mark.parametrize("source", ["numpy", "dask"])
@pytest.mark.parametrize("op", ["index_select", "gather"])
def test_a_select_hitting_far_apart_chunks_of_a_broadcast_reads_no_row_of_it(op: str, source: str,
                                                                           every_backend: str,
                                                                           bits_equal) -> None:
    """Chunks of one buffer that a select hits far apart were concatenated when the gap was
    larger than the parts: for a broadcast, each part materialised (3 x 10^4 x 1000 elements here
    for 3 of 10^4 x 3 picked); the span of a broadcast costs what its base row does. Chunks of a
    dask array are read per chunk, a gather's raveled (a copy of a broadcast chunk): now through
    the chunk's memory span."""
    rows = 10**4
    base = lf.from_array(BASE if source == "numpy" else da.from_array(BASE, chunks=1000), chunks=1000)
    x = lf.broadcast_to(base, (rows, N))
    idx = np.array([3, N - 2, 5000])
    if op == "index_select":
        y, want = x.index_select(1, idx), np.broadcast_to(BASE[idx], (rows, 3))
    else:
        y, want = x.gather(1, np.tile(idx, (rows, 1))), np.broadcast_to(BASE[idx], (rows, 3))
    y.compute()
    got, peak = _peak(y.compute)
    bits_equal(got, np.ascontiguousarray(want))
    index_bytes = 8 * got.size  # a read task turns each index into a position and an offset
    assert peak < LIMIT + 4 * index_bytes + 3 * got.nbytes, \
        f"{op} on {every_backend}: peak {peak / 2**20:.1f} MiB"


@pytest.mark.parametrize("view", ["transposed", "reversed strided", "broadcast", "contiguous"])
def test_a_raveled_view_reads_the_same_elements_through_its_span(view: str) -> None:
    a = DENSE[:40, :30]
    data = {"transposed": a.T, "reversed strided": a[::-3, ::-2],
            "broadcast": np.broadcast_to(a[0], (50, 30)), "contiguous": np.ascontiguousarray(a)}[view]
    positions = RNG.integers(0, data.size, 500).astype(np.uint32)
    flat, at = raveled(data, positions)
    assert flat.ndim == 1 and at.dtype == np.uint32
    np.testing.assert_array_equal(flat[at].view(np.uint32), data.reshape(-1)[positions].view(np.uint32))
    if view == "broadcast":
        assert flat.size == 30  # the base row, not 50 copies of it


def _random_key(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple:
    """A basic index: per axis an int (negative too) or a slice with any step."""
    key = []
    for n in shape:
        if rng.random() < 0.3:
            key.append(int(rng.integers(-n, n)))
        else:
            step = int(rng.choice([1, 2, -1, -3]))
            stop = None if rng.random() < 0.5 else int(rng.integers(-n, n))
            key.append(slice(int(rng.integers(-n, n)), stop, step))
    return tuple(key)


def test_random_picks_of_op_results_equal_numpys(backend: str, bits_equal) -> None:
    """Every op a pick moves below, with int, negative and stepped keys, concrete and lazy
    indices: the values are numpy's."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((6, 7, 5)).astype(np.float32)
    mask = rng.random((7, 5)) < 0.5
    idx = rng.integers(0, 7, 9)
    gidx = rng.integers(0, 6, (4, 7, 5))
    x = lf.from_array(a, chunks=(2, 3, 5))
    ops = {
        "masked_fill": (lambda: lf.masked_fill(x, mask, -2.0), np.where(mask, np.float32(-2), a)),
        "contiguous.T": (lambda: lf.contiguous(x).transpose((2, 0, 1)), a.transpose(2, 0, 1)),
        "index_select": (lambda: x.index_select(1, idx), a[:, idx]),
        "index_select lazy": (lambda: x.index_select(1, da.from_array(idx, chunks=4)), a[:, idx]),
        "gather": (lambda: x.gather(0, gidx), np.take_along_axis(a, gidx, 0)),
        "gather lazy": (lambda: x.gather(0, da.from_array(gidx, chunks=2)), np.take_along_axis(a, gidx, 0)),
        "rfft": (lambda: lf.rfft(x, axis=1), np.fft.rfft(a, axis=1)),
    }
    if backend == "vulkan":
        del ops["rfft"]  # no FFT bindings on Vulkan
    for name, (build, want) in ops.items():
        for _ in range(12):
            key = _random_key(rng, want.shape)
            got = build()[key].compute()
            if name == "rfft":
                np.testing.assert_allclose(got, want[key], rtol=1e-4, atol=1e-4, err_msg=f"{name}{key}")
            else:
                bits_equal(got, np.array(want[key]))  # (ascontiguousarray makes 0-d 1-d)
