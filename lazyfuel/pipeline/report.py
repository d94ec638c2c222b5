"""The closing summary of `lazyfuel run`: outputs, wall time, where it ran, bytes moved, GB/s,
bindings.

Where it ran, bytes and bindings come from `lf.profile()` (what really ran in this process: each
program's backend and device, as its executor recorded them). Where it counted
nothing (a processes or distributed scheduler runs the kernels in other processes, whose
profiles this one cannot see) the summary says so and falls back to the logical bytes (inputs
read + outputs written, from shapes) and to the bindings the planner chose (`lf.explain`); bindings
the planner chose that the profile did not count are listed apart; where it ran is then the
backends of the planned bindings.
"""

from __future__ import annotations

import re
from collections import Counter

import lazyfuel as lf
from lazyfuel.pipeline.run import Built, RunResult

_BINDING = re.compile(r" via (\([^)]*\))")
_KEY = re.compile(r"^\([^)]*\)")
_BACKEND = re.compile(r",(\w+)\)$")  # the backend closing a binding key "(Op,[dtypes],Backend)"


def planned_bindings(built: Built) -> Counter:
    """The bindings `lf.explain` plans for each output's representative blocks."""
    found: Counter = Counter()
    for _, arr in built.outputs:
        found.update(_BINDING.findall(lf.explain(arr)))
    return found


def ran_on(result: RunResult, planned: Counter) -> str:
    """Where the run's programs ran, by backend and device, as `lf.profile` counted them (most
    first); else the backends of the `planned` bindings, saying so; else that no kernel ran."""
    where = result.profile.where
    if where:
        parts = [f"{n} program(s) on {_place(backend, device)}"
                 for (backend, device), n in sorted(where.items(), key=lambda kv: (-kv[1], kv[0]))]
        return "ran on (lf.profile): " + ", ".join(parts)
    backends = sorted({m.group(1) for key in planned if (m := _BACKEND.search(key))})
    if backends:
        return (f"ran on {', '.join(backends)} as planned (lf.profile counted no program in this "
                f"process: the {result.scheduler} scheduler ran them elsewhere)")
    return "ran no kernel (views of the inputs only)"


def _place(backend: str, device: str) -> str:
    if backend == "Cpu":
        return "the CPU (numpy)"
    return f"{backend} {device}".rstrip()


def summary(built: Built, result: RunResult) -> str:
    """The lines printed after a run."""
    lines = [s.line() for s in result.summaries]
    wall = max(result.wall_seconds, 1e-9)
    planned = planned_bindings(built)
    lines.append(f"ran {built.graph.path} in {result.wall_seconds:.2f} s (scheduler {result.scheduler})")
    lines.append(ran_on(result, planned))
    prof = result.profile
    logical = f"{_size(result.logical_bytes)} logical (inputs read + outputs written) at " \
              f"{result.logical_bytes / wall / 1e9:.2f} GB/s"
    if result.bytes_counted:
        device_bytes = prof.bytes_uploaded + prof.bytes_downloaded
        lines.append(f"moved {_size(device_bytes)} to and from the device (lf.profile) at "
                     f"{device_bytes / wall / 1e9:.2f} GB/s; {logical}")
    else:
        lines.append(f"moved {logical}")
    if prof.programs or prof.submits:
        lines.append(f"device work: {prof.programs} program(s), {prof.submits} submit(s), "
                     f"{prof.dispatches} dispatch(es), {prof.device_seconds * 1e3:.1f} ms on the device")
    if prof.bindings:
        lines.append("bindings used (lf.profile):")
        lines += [f"  {n}x {name}" for name, n in sorted(prof.bindings.items())]
        counted = {_KEY.match(name).group(0) for name in prof.bindings if _KEY.match(name)}
        uncounted = sorted(k for k in planned if k not in counted)
        if uncounted:
            lines.append("bindings planned but not counted by lf.profile (their executor does not report "
                         "to it): " + ", ".join(uncounted))
    else:
        lines.append("bindings planned (lf.profile recorded none in this process): "
                     + (", ".join(sorted(planned)) or "none"))
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
