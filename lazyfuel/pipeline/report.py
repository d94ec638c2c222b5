"""The closing summary of `lazyfuel run`: outputs, wall time, bytes moved, GB/s, bindings, device.

Bytes and bindings come from `lf.profile()` (what really ran in this process). Where it counted
nothing (a processes or distributed scheduler runs the kernels in other processes, whose
profiles this one cannot see) the summary says so and falls back to the logical bytes (inputs
read + outputs written, from shapes) and to the bindings the planner chose (`lf.explain`).
"""

from __future__ import annotations

import re
from collections import Counter

import lazyfuel as lf
from lazyfuel.pipeline.run import Built, RunResult

_BINDING = re.compile(r" via (\([^)]*\))")


def planned_bindings(built: Built) -> Counter:
    """The bindings `lf.explain` plans for each output's representative blocks."""
    found: Counter = Counter()
    for _, arr in built.outputs:
        found.update(_BINDING.findall(lf.explain(arr)))
    return found


def summary(built: Built, result: RunResult, device: str) -> str:
    """The lines printed after a run."""
    lines = [s.line() for s in result.summaries]
    wall = result.wall_seconds
    lines.append(f"ran {built.graph.path} in {wall:.2f} s on {device} (scheduler {result.scheduler})")
    moved = result.bytes_moved
    source = "uploaded + downloaded, counted by lf.profile" if result.bytes_counted else \
        "logical: inputs read + outputs written"
    lines.append(f"moved {_size(moved)} ({source}) at {moved / max(wall, 1e-9) / 1e9:.2f} GB/s")
    prof = result.profile
    if prof.programs or prof.submits:
        lines.append(f"device work: {prof.programs} program(s), {prof.submits} submit(s), "
                     f"{prof.dispatches} dispatch(es), {prof.device_seconds * 1e3:.1f} ms on the device")
    if prof.bindings:
        lines.append("bindings used: " + ", ".join(f"{k} x{n}" for k, n in sorted(prof.bindings.items())))
    else:
        planned = ", ".join(sorted(planned_bindings(built))) or "none"
        lines.append(f"bindings planned (lf.profile recorded none in this process): {planned}")
    if result.peak_growth is not None:
        limit = built.graph.memory_limit
        cap = f" (limit {_size(limit)})" if limit is not None else ""
        lines.append(f"peak memory growth {_size(max(result.peak_growth, 0))}{cap}")
    return "\n".join(lines)


def _size(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"
