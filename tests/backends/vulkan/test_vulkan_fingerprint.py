"""`lazyfuel.backends.vulkan.fingerprint`: the device fingerprint the judge keys by names the
device, its driver, API and pipeline-cache UUID, and for a CPU device (lavapipe) the host CPU and
LP_NUM_THREADS, which set its speed. The real pool's device."""

from __future__ import annotations

from dataclasses import replace

from lazyfuel.backends.host import host_cpu
from lazyfuel.backends.vulkan.fingerprint import vulkan_fingerprint


def test_it_names_the_device_driver_api_and_cache_uuid(pool):
    info = pool.info
    text = vulkan_fingerprint()
    assert text == vulkan_fingerprint(info)
    parts = text.split(" | ")
    assert parts[:5] == ["Vulkan", f"{info.name} ({info.kind})", f"driver {info.driver} {info.driver_info}",
                         f"api {info.api_version}", f"pipeline cache {info.pipeline_cache_uuid}"]


def test_a_cpu_device_names_the_host_and_its_thread_count(pool, monkeypatch):
    cpu = replace(pool.info, kind="cpu")
    monkeypatch.setenv("LP_NUM_THREADS", "3")
    assert vulkan_fingerprint(cpu).endswith(f" | host {host_cpu()}; LP_NUM_THREADS=3")
    monkeypatch.delenv("LP_NUM_THREADS")
    assert vulkan_fingerprint(cpu).endswith("; LP_NUM_THREADS=")
    gpu = replace(pool.info, kind="discrete")
    assert "host " not in vulkan_fingerprint(gpu) and "LP_NUM_THREADS" not in vulkan_fingerprint(gpu)


def test_any_change_of_the_device_changes_it(pool):
    info = pool.info
    base = vulkan_fingerprint(info)
    for change in ({"driver_info": info.driver_info + "-1"}, {"pipeline_cache_uuid": "0" * 32},
                   {"api_version": "9.9.9"}, {"name": info.name + " 2"}):
        assert vulkan_fingerprint(replace(info, **change)) != base
