"""One object per op: each module defines an op kind's `OpSpec` and registers it.

The layer sits above `contracts` (and the bottom modules) and below the registry, the planner, the
judge, the audit and the graph, which look an op up with `spec_for(kind)` instead of keeping a
table of their own. A new op adds its module and one line here.
"""

from lazyfuel.ops import contiguize, fft, gather, index_select, masked_fill, select_fill  # noqa: F401  (registers them)
from lazyfuel.ops.spec import Case, KernelParams, OpSpec, Timed, find, spec_for, specs

__all__ = ["Case", "KernelParams", "OpSpec", "Timed", "find", "spec_for", "specs"]
