"""The Vulkan priors by device kind (`backends.vulkan.priors`, issue 18 item 3): a probed link in
place of the kind's; with nothing measured, a step costs in proportion to
the bytes it moves, a transfer to the bytes that cross the link, and the backend a workload
belongs on wins on the first run: the Cpu on lavapipe, the GPU on a discrete device."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from lazyfuel.backends import catalog
from lazyfuel.backends.cpu.priors import host_prior
from lazyfuel.backends.vulkan.priors import BY_KIND, kind_prior
from lazyfuel.contracts.model import Backend
from lazyfuel.dtypes import DType
from lazyfuel.judge import MeasuredCosts
from lazyfuel.judged_costs import measured_costs
from lazyfuel.layout import Layout
from lazyfuel.planner import Chain, OpNode, Planner
from lazyfuel.providers import default_registry

SELECT = Chain(2, (OpNode("IndexSelect", (0, 1), (("dim", 0),)),), (2,))
SELECT_FILL = Chain(3, (OpNode("IndexSelect", (0, 1), (("dim", 0),)),
                        OpNode("MaskedFill", (3, 2), (("value", -1.0),))), (4,))


@pytest.fixture(autouse=True)
def _quiet(unmeasured_quietly):
    """Every test here plans with the priors (`unmeasured_quietly`)."""


def _priors(kind: str) -> MeasuredCosts:
    return MeasuredCosts(priors={Backend.Cpu: host_prior(), Backend.Vulkan: kind_prior(kind)})


def _select(rows: int, cols: int = 256, ids: int | None = None):
    """The signature of an index_select of `ids` (default all) rows from a (rows, cols) f32 source."""
    n = rows if ids is None else ids
    return [DType.F32, DType.U32], [Layout.contiguous((rows, cols)), Layout.contiguous((n,))]


def _select_fill(rows: int, cols: int = 1024):
    return ([DType.F32, DType.U32, DType.BOOL],
            [Layout.contiguous((rows, cols)), Layout.contiguous((rows,)), Layout.contiguous((rows, cols))])


def _plan(kind: str, chain: Chain, signature, order=(Backend.Vulkan, Backend.Cpu)):
    return Planner(default_registry(), list(order), costs=_priors(kind)).plan(chain, *signature)


@pytest.mark.parametrize("backend", [Backend.Vulkan, Backend.Cpu])
def test_an_unmeasured_step_costs_in_proportion_to_its_bytes(backend) -> None:
    # the report: index_selects of 64 MiB and 1 GiB were both "estimated 67.21 ms"
    small = _plan("discrete", SELECT, _select(65536), order=(backend,))
    large = _plan("discrete", SELECT, _select(1 << 20), order=(backend,))
    ratio = large.steps_cost / small.steps_cost
    assert 8 < ratio <= 16, ratio  # 16x the bytes; the fixed cost per call keeps it under


def test_an_unmeasured_transfer_is_priced_by_the_bytes_crossing_the_link() -> None:
    costs = _priors("discrete")
    link = BY_KIND["discrete"].link
    small = costs.transfer_cost(Backend.Vulkan, [1 << 20], [1 << 20])
    large = costs.transfer_cost(Backend.Vulkan, [1 << 30], [1 << 20])
    assert large - small == pytest.approx(((1 << 30) - (1 << 20)) / link.up_bytes_per_s)
    assert costs.transfer_cost(Backend.Cpu, [1 << 30], [1 << 30]) == 0.0  # numpy moves nothing


def test_a_gather_from_a_large_table_stays_where_the_table_is() -> None:
    # 4096 rows out of 2M (2 GiB): shipping the whole span costs more than numpy's take, on any kind
    for kind in BY_KIND:
        program = _plan(kind, SELECT, _select(2 << 20, ids=4096))
        assert program.backend is Backend.Cpu, kind
        vulkan = program.choices[0].candidates[0]
        assert vulkan.transfer > 0.1  # 2 GiB over the link, priced


def test_select_fill_goes_to_a_discrete_gpu_and_stays_on_the_cpu_under_lavapipe() -> None:
    # W1's block: 32 MiB of rows permuted and filled
    assert _plan("discrete", SELECT_FILL, _select_fill(8192)).backend is Backend.Vulkan
    assert _plan("cpu", SELECT_FILL, _select_fill(8192)).backend is Backend.Cpu


def test_measured_costs_of_this_process_know_the_vulkan_device_kind(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LAZYFUEL_CACHE_DIR", str(tmp_path))  # an empty judge cache
    costs = measured_costs(default_registry(), [Backend.Vulkan, Backend.Cpu])
    assert costs.priors[Backend.Vulkan].kind == catalog.device_prior(Backend.Vulkan).kind == "cpu"  # lavapipe
    program = Planner(default_registry(), [Backend.Vulkan, Backend.Cpu], costs=costs).plan(
        SELECT_FILL, *_select_fill(8192))
    assert program.backend is Backend.Cpu
    assert np.isfinite(program.cost)


def test_a_probed_link_replaces_the_kinds_link_and_caps_the_kernels_at_the_devices_copy_rate() -> None:
    from lazyfuel.backends.vulkan.link_probe import LinkProbe

    probe = LinkProbe(submit_s=2e-5, up_bytes_per_s=3e9, down_bytes_per_s=4e9, pinned_up_bytes_per_s=5e9,
                      pinned_down_bytes_per_s=6e9, copy_bytes_per_s=7e11)
    prior = kind_prior("discrete", probe)
    assert prior.kind == "discrete" and prior.link.source == "probed"
    # the probe's rates, the kind's import rate (the probe does not time pinning)
    assert prior.link == replace(probe.link, import_bytes_per_s=23e9, read_row_s=28e-9)
    assert prior.kernels.bytes_per_s == 7e11  # the kind's 1e12 capped at the device's copy rate
    assert prior.kernels.flops_per_s == BY_KIND["discrete"].kernels.flops_per_s
    assert kind_prior("discrete") is BY_KIND["discrete"]  # no probe: the kind's own prior


def test_an_unknown_device_kind_gets_the_default_kernels_over_host_memory() -> None:
    from lazyfuel.backends.vulkan.priors import KERNELS

    prior = kind_prior("accelerator")
    assert prior.kind == "accelerator" and prior.kernels == KERNELS
    assert prior.link == BY_KIND["cpu"].link  # host memory's link
