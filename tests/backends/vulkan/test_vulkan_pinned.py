"""`lf.pinned(...)`: host arrays imported once per device and reused by every chunk and run of the
block (the imports are the driver's pinning, which bounds host → GPU → host streaming on a
discrete GPU), released when the block ends or the allocator goes away; results stay exact."""

from __future__ import annotations

import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel.backends.vulkan import pinned as pinning
from lazyfuel.backends.vulkan.transfer import in_mode


@pytest.fixture(params=["import", "zero-copy"])
def importing(request, pool, vulkan):
    """The pool in a mode that imports host arrays, every array however small."""
    try:
        with in_mode(pool, request.param, import_min=0) as allocator:
            if allocator.imports is None:
                pytest.skip("the device cannot import host memory")
            yield allocator
    except ValueError as err:
        pytest.skip(str(err))


def _pipeline(rows: int = 512, cols: int = 64, chunk: int = 128):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((rows, cols), dtype=np.float32)
    idx = np.concatenate([c + rng.permutation(chunk) for c in range(0, rows, chunk)])
    mask = rng.random((rows, 1)) < 0.5
    y = lf.masked_fill(lf.index_select(lf.from_array(a, chunks=(chunk, cols)), 0, idx), mask, -1.0)
    return a, y, np.where(mask, np.float32(-1), a[idx])


def test_registered_arrays_are_imported_once_and_released_at_the_end(importing, monkeypatch):
    a, y, want = _pipeline()
    out = np.zeros(want.shape, want.dtype)
    before = importing.resources()["imports"]
    calls = []
    real = importing.imports.import_range
    monkeypatch.setattr(importing.imports, "import_range",
                        lambda *args: (calls.append(args[:2]), real(*args))[1])
    with lf.pinned(a, out):
        made, live = [], []
        for _ in range(3):
            out[:] = np.nan
            assert y.compute(out=out) is out and np.array_equal(out, want)
            made.append(len(calls))
            live.append(importing.resources()["imports"] - before)
        spans = {a.ctypes.data, out.ctypes.data}
        # the first run imports a and out whole (the small index and mask arrays each run, as before)
        assert spans <= {address for address, _ in calls[:made[0]]}
        assert not spans & {address for address, _ in calls[made[0]:]}, "a or out imported again"
        assert live[0] >= 2 and live == [live[0]] * 3, live
    assert importing.resources()["imports"] == before
    assert y.compute().tobytes() == want.tobytes()  # and without the block, as before


def test_a_range_across_a_segment_boundary_is_imported_on_its_own(importing, monkeypatch):
    monkeypatch.setattr(pinning, "SEGMENT", 96 * 64 * 4)  # 96 rows: chunks of 128 rows straddle
    a, y, want = _pipeline()
    out = np.zeros(want.shape, want.dtype)
    before = importing.resources()["imports"]
    with lf.pinned(a, out):
        assert np.array_equal(y.compute(out=out), want)
    assert importing.resources()["imports"] == before


def test_an_allocator_going_away_releases_its_borrowed_imports(pool, vulkan):
    a, y, want = _pipeline()
    with lf.pinned(a):
        with in_mode(pool, "import", import_min=0) as allocator:
            if allocator.imports is None:
                pytest.skip("the device cannot import host memory")
            assert np.array_equal(y.compute(), want)
            assert allocator.resources()["imports"] >= 1
        assert not [key for key in pinning._cached if key[0] in pinning._ranges]  # forgotten
    assert not pinning._ranges and not pinning._cached
