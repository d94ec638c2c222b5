"""GPU facts for the benchmarks: the Vulkan device's UUID and nvidia-smi clock samples.

`Clocks(path)` starts `nvidia-smi --query-gpu=timestamp,index,uuid,clocks.sm,clocks.mem,...
-lms 100` writing to `path` (nothing where nvidia-smi is missing); `mark(name, start, end)` names
a window of wall-clock time; `stop(uuid)` ends the sampling and gives, per window, the SM and
memory clock range of the GPU with that UUID (`vulkan_uuid(pool)`, as nvidia-smi prints it
without 'GPU-' and dashes).
"""

from __future__ import annotations

import shutil
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import vulkan as vk


def vulkan_uuid(pool: Any) -> str:
    """The Vulkan device's UUID as 32 hex digits (what nvidia-smi and torch report, undashed)."""
    ffi = vk.ffi
    ids = ffi.new("VkPhysicalDeviceIDProperties*",
                  {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES})
    props = ffi.new("VkPhysicalDeviceProperties2*", {
        "sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, "pNext": ids})
    vk.lib.vkGetPhysicalDeviceProperties2(pool.physical, props)
    return bytes(ffi.buffer(ids.deviceUUID, 16)).hex()


class Clocks:
    """nvidia-smi sampling SM and memory clocks every 100 ms into a CSV file, read back per window."""

    def __init__(self, path: Path) -> None:
        self.path, self.proc, self.windows = path, None, {}
        if shutil.which("nvidia-smi"):
            self.proc = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=timestamp,index,uuid,clocks.sm,clocks.mem,utilization.gpu",
                 "--format=csv,noheader,nounits", "-lms", "100"], stdout=path.open("w"),
                stderr=subprocess.DEVNULL)

    def mark(self, name: str, start: float, end: float) -> None:
        self.windows[name] = (start, end)

    def stop(self, uuid: str) -> dict[str, str]:
        """Per window: 'SM min-max MHz, mem min-max MHz' of the GPU with `uuid`."""
        if self.proc is None:
            return {}
        self.proc.terminate()
        self.proc.wait()
        rows = []
        for line in self.path.read_text().splitlines():
            cells = [c.strip() for c in line.split(",")]
            if len(cells) < 6 or cells[2].replace("GPU-", "").replace("-", "") != uuid:
                continue
            try:
                t = datetime.strptime(cells[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                rows.append((t, int(cells[3]), int(cells[4])))
            except ValueError:
                continue
        out = {}
        for name, (a, b) in self.windows.items():
            inside = [(sm, mem) for t, sm, mem in rows if a <= t <= b]
            if inside:
                sms, mems = [s for s, _ in inside], [m for _, m in inside]
                out[name] = (f"SM {min(sms)}-{max(sms)} MHz, mem {min(mems)}-{max(mems)} MHz "
                             f"({len(inside)} samples)")
        return out
