"""Transfers are priced by where the data is (issue 18 item 3): an input resident on the program's
device uploads nothing, a resident input read on the host pays a download, a result kept on the
device pays no download, and the planner weighs that against computing where the data is."""

from __future__ import annotations

import pytest

from lazyfuel.backends.cpu.priors import host_prior
from lazyfuel.backends.vulkan.priors import kind_prior
from lazyfuel.contracts.model import Backend
from lazyfuel.dtypes import DType
from lazyfuel.judge import MeasuredCosts
from lazyfuel.layout import Layout
from lazyfuel.planner import Chain, OpNode, Planner
from lazyfuel.planner.placement import Placement, link_bytes
from lazyfuel.providers import default_registry

V, CPU = Backend.Vulkan, Backend.Cpu
SELECT = Chain(2, (OpNode("IndexSelect", (0, 1), (("dim", 0),)),), (2,))
TABLE = 1 << 30  # bytes of a (1M, 256) f32 table


@pytest.fixture(autouse=True)
def _quiet(unmeasured_quietly):
    """Every test here plans with the priors (`unmeasured_quietly`)."""


def test_what_moves_over_each_link_follows_where_the_data_is_and_is_wanted():
    host = link_bytes(V, [TABLE, 16], [4096])
    assert host == {V: ([TABLE, 16], [4096])}  # everything up, the result down
    resident = link_bytes(V, [TABLE, 16], [4096], Placement.of([V, None]))
    assert resident == {V: ([16], [4096])}  # the resident table uploads nothing
    kept = link_bytes(V, [TABLE, 16], [4096], Placement.of([V, None], result=V))
    assert kept == {V: ([16], [])}  # compute(device=True): no download
    assert link_bytes(CPU, [TABLE, 16], [4096]) == {}  # numpy in host memory moves nothing
    on_host = link_bytes(CPU, [TABLE, 16], [4096], Placement.of([V, None], result=V))
    assert on_host == {V: ([4096], [TABLE])}  # the table comes down, the result goes back up
    assert Placement.of([CPU, None], result=CPU) == Placement((None, None), None)  # Cpu is the host


def _planner() -> Planner:
    priors = {CPU: host_prior(), V: kind_prior("discrete")}
    return Planner(default_registry(), [V, CPU], costs=MeasuredCosts(priors=priors))


def _gather(placement: Placement | None):
    """4096 rows out of a 2 GiB table (the signature of one block of W2)."""
    layouts = [Layout.contiguous((2 << 20, 256)), Layout.contiguous((4096,))]
    return _planner().plan(SELECT, [DType.F32, DType.U32], layouts, placement)


def test_a_gather_runs_where_its_table_is():
    on_host = _gather(None)
    assert on_host.backend is CPU  # shipping 2 GiB costs more than numpy's take
    resident = _gather(Placement.of([V, None]))
    assert resident.backend is V  # the table is on the device already: only the ids go up
    assert resident.links == ((V, (4096 * 4,), (4096 * 1024,)),)
    vulkan = resident.choices[0].candidates[0]
    assert vulkan.transfer < 1e-3


def test_a_resident_input_read_on_the_host_pays_its_download_and_a_kept_result_its_upload():
    costs = MeasuredCosts(priors={CPU: host_prior(), V: kind_prior("discrete")})
    layouts = [Layout.contiguous((65536, 256)), Layout.contiguous((4096,))]
    cpu_only = Planner(default_registry(), [CPU], costs=costs)
    host = cpu_only.plan(SELECT, [DType.F32, DType.U32], layouts)
    resident = cpu_only.plan(SELECT, [DType.F32, DType.U32], layouts, Placement.of([V, None], V))
    assert host.transfer_cost == 0.0 and host.links == ()
    assert resident.links == ((V, (4096 * 1024,), (65536 * 1024,)),)
    link = kind_prior("discrete").link
    assert resident.transfer_cost == pytest.approx(link.seconds([4096 * 1024], [65536 * 1024]))


def test_plans_are_cached_per_placement():
    planner = _planner()
    layouts = [Layout.contiguous((2 << 20, 256)), Layout.contiguous((4096,))]
    first = planner.plan(SELECT, [DType.F32, DType.U32], layouts)
    again = planner.plan(SELECT, [DType.F32, DType.U32], layouts, Placement.of([V, None]))
    assert (first.backend, again.backend) == (CPU, V)


def test_a_placement_all_in_host_memory_is_no_placement_and_planned_once():
    planner = _planner()
    layouts = [Layout.contiguous((2 << 20, 256)), Layout.contiguous((4096,))]
    first = planner.plan(SELECT, [DType.F32, DType.U32], layouts)
    for host in (Placement(), Placement((None, None), None), Placement.of([CPU, None], result=CPU)):
        assert host.all_host
        assert planner.plan(SELECT, [DType.F32, DType.U32], layouts, host) is first  # the cached program
    assert not Placement.of([V, None]).all_host and not Placement((None, None), V).all_host
