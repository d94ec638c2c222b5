"""`lazyfuel.bench.plot`: the bench's timings drawn to a PNG (a panel per op, a line per
implementation), its folder made when missing."""

from __future__ import annotations

from lazyfuel.bench.best_of import Timing
from lazyfuel.bench.plot import plot


def test_the_plot_is_a_png_written_where_asked(tmp_path):
    timings = [Timing(op, size, impl, seconds, 2**20 * 8)
               for op in ("gather", "masked_fill", "index_select")
               for size in (2**20, 4 * 2**20)
               for impl, seconds in (("numpy", 0.01), ("dask", 0.03), ("lazyfuel", 0.0001))]
    out = plot(timings, tmp_path / "new" / "bench.png", "lavapipe (test)")
    assert out == tmp_path / "new" / "bench.png"
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_one_op_of_close_rates_plots_too(tmp_path):
    timings = [Timing("gather", 2**20, impl, 0.01, 2**20) for impl in ("numpy", "lazyfuel")]
    assert plot(timings, tmp_path / "one.png", "cpu").read_bytes()[:4] == b"\x89PNG"
