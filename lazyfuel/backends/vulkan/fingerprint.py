"""The Vulkan device's fingerprint: what the judge keys its measurements and shape picks by."""

from __future__ import annotations

from typing import Any

from lazyfuel.backends.host import host_cpu
from lazyfuel.settings import environment


def vulkan_fingerprint(info: Any = None) -> str:
    """The Vulkan pool's device (or the device `info`, a `DeviceInfo`): name, kind, driver and its
    version, API, pipeline-cache UUID (and vendor / device ids and device UUID where the backend
    reports them). A CPU device (lavapipe) also names the host CPU and `LP_NUM_THREADS`, which set
    its speed."""
    if info is None:
        from lazyfuel.backends.vulkan import get_pool

        info = get_pool().info
    parts = [f"Vulkan | {info.name} ({info.kind})", f"driver {info.driver} {info.driver_info}",
             f"api {info.api_version}", f"pipeline cache {info.pipeline_cache_uuid}"]
    parts += [f"{name} {getattr(info, name)}" for name in ("vendor_id", "device_id", "device_uuid")
              if getattr(info, name, None) is not None]
    if info.kind == "cpu":
        parts.append(f"host {host_cpu()}; LP_NUM_THREADS={environment().get('LP_NUM_THREADS', '')}")
    return " | ".join(parts)
