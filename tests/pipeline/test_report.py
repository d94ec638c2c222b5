"""`lazyfuel.pipeline.report`: the summary after `lazyfuel run`: where programs ran (as
`lf.profile` counted them, else the planned bindings' backends, else no kernel), bytes moved and
GB/s (counted, else logical), the bindings used or planned, peak memory; sizes in binary units.
The graph is the quickstart one, made small, built for real on the CPU backend."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from lazyfuel.pipeline import build, load_graph
from lazyfuel.pipeline.report import _size, planned_bindings, ran_on, summary
from lazyfuel.pipeline.run import RunResult
from lazyfuel.profiling import Profile

QUICKSTART = Path(__file__).resolve().parents[2] / "graphs" / "quickstart.yaml"


@pytest.fixture
def built(monkeypatch):
    monkeypatch.setenv("LAZYFUEL_BACKEND", "cpu")
    return build(load_graph(QUICKSTART, {"rows": "1000", "batch": "200"}), write_stores=False)


def result(profile: Profile, **changes) -> RunResult:
    fields = {"summaries": [], "wall_seconds": 0.5, "profile": profile, "logical_bytes": 3 * 2**20,
              "peak_growth": None, "scheduler": "threads", **changes}
    return RunResult(**fields)


def test_the_planned_bindings_are_the_cpu_ones_of_each_output(built):
    planned = planned_bindings(built)
    assert planned and all(key.startswith("(") and key.endswith(",Cpu)") for key in planned)
    assert any(key.startswith("(Gather,") for key in planned)


def test_where_it_ran_is_the_profiles_count_most_first():
    profile = Profile()
    profile.where.update({("Vulkan", "llvmpipe [0]"): 3, ("Cpu", ""): 5, ("OpenCL", "pocl"): 3})
    assert ran_on(result(profile), Counter()) == (
        "ran on (lf.profile): 5 program(s) on the CPU (numpy), 3 program(s) on OpenCL pocl, "
        "3 program(s) on Vulkan llvmpipe [0]")


def test_without_a_count_where_it_ran_is_the_planned_backends_or_no_kernel():
    planned = Counter({"(Gather,[F32,U32,F32],Vulkan)": 2, "(IndexSelect,[F32,U32,F32],Cpu)": 1})
    assert ran_on(result(Profile(), scheduler="processes"), planned) == (
        "ran on Cpu, Vulkan as planned (lf.profile counted no program in this process: the processes "
        "scheduler ran them elsewhere)")
    assert ran_on(result(Profile()), Counter()) == "ran no kernel (views of the inputs only)"


def test_a_counted_run_reports_device_bytes_work_and_uncounted_bindings(built):
    planned = planned_bindings(built)
    counted = sorted(planned)[0]
    profile = Profile(submits=2, dispatches=6, programs=2, bytes_uploaded=2**20, bytes_downloaded=2**20,
                      device_seconds=0.012)
    profile.bindings.update({f"{counted} numpy -> some_symbol": 2})
    lines = summary(built, result(profile, peak_growth=5 * 2**20)).splitlines()
    assert lines[0] == f"ran {QUICKSTART} in 0.50 s (scheduler threads)"
    assert lines[2] == ("moved 2.0 MiB to and from the device (lf.profile) at 0.00 GB/s; 3.0 MiB logical "
                        "(inputs read + outputs written) at 0.01 GB/s")
    assert lines[3] == "device work: 2 program(s), 2 submit(s), 6 dispatch(es), 12.0 ms on the device"
    assert lines[4:6] == ["bindings used (lf.profile):", f"  2x {counted} numpy -> some_symbol"]
    others = sorted(k for k in planned if k != counted)
    if others:
        assert lines[6] == ("bindings planned but not counted by lf.profile (their executor does not report "
                            "to it): " + ", ".join(others))
    limit = built.graph.memory_limit
    cap = f" (limit {_size(limit)})" if limit is not None else ""
    assert lines[-1] == f"peak memory growth 5.0 MiB{cap}"


def test_an_uncounted_run_reports_logical_bytes_and_the_planned_bindings(built):
    lines = summary(built, result(Profile(), scheduler="processes")).splitlines()
    assert lines[2] == "moved 3.0 MiB logical (inputs read + outputs written) at 0.01 GB/s"
    assert lines[3] == ("bindings planned (lf.profile recorded none in this process): "
                        + ", ".join(sorted(planned_bindings(built))))


@pytest.mark.parametrize(("n", "text"), [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"),
                                         (3 * 2**20 // 2, "1.5 MiB"), (2**31, "2.0 GiB"),
                                         (2**45, "32768.0 GiB")])
def test_sizes_are_in_binary_units(n: int, text: str):
    assert _size(n) == text
