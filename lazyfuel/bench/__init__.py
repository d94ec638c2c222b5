"""`lazyfuel bench`: numpy, dask and lazyfuel on the same select workloads; a table and a plot."""

from lazyfuel.bench.best_of import FULL_SIZES, QUICK_SIZES, Timing, measure, table
from lazyfuel.bench.plot import plot
from lazyfuel.bench.workloads import WORKLOADS

__all__ = ["FULL_SIZES", "QUICK_SIZES", "WORKLOADS", "Timing", "measure", "plot", "table"]
