"""What making page-locked staging costs, by thread count: the driver's blocks against imported pages.

Decides: how a first compute should get its page-locked staging (issue 18: W2's first
`compute(device=True)` ran 127-144 ms against 36-39 warm, and the first W1 compute at 8 MiB chunks
ran at 1.9 GB/s against 37-39 warm; the staging the allocator makes on NVIDIA's driver costs ~3
GB/s, made one block at a time under the allocator's lock). For each block size (`--mibs`) and
thread count (`--threads`), each thread makes `--blocks` blocks at once with the others, timed
from the first start to the last end, then frees them:

- `upload`: `VulkanAllocator.make_block(size, Use.UPLOAD)` (the driver's write-combined host memory);
- `download`: the same with `Use.DOWNLOAD` (host-cached);
- `import fresh`: `np.empty` (numpy advises huge pages), every page written by the thread, then
  imported (`HostImports.import_range`, VK_EXT_external_memory_host);
- `import touched`: the import alone, of memory written beforehand;
- `touch`: `np.empty` and every page written, no import (what the kernel's page faults cost).

GB/s are the bytes of all blocks over the wall. Where the import is not offered, its rows say so.

    python benchmarks/probes/staging_cost.py [--mibs 16,64,128] [--threads 1,4,16] [--blocks 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from lazyfuel.backends.vulkan import get_pool, register
from lazyfuel.backends.vulkan.memory import faulted_pages
from lazyfuel.backends.vulkan.memtypes import Use

PAGE = 4096


def at_once(threads: int, work: Callable[[int], Any]) -> tuple[float, list[Any]]:
    """Run `work(i)` on `threads` threads released together: (seconds first start to last end,
    what each returned)."""
    barrier = threading.Barrier(threads + 1)
    found: list[Any] = [None] * threads
    spans: list[tuple[float, float]] = [(0.0, 0.0)] * threads

    def run(i: int) -> None:
        barrier.wait()
        start = time.perf_counter()
        found[i] = work(i)
        spans[i] = (start, time.perf_counter())

    pool = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    barrier.wait()
    for t in pool:
        t.join()
    return max(b for _, b in spans) - min(a for a, _ in spans), found


def touched(nbytes: int) -> np.ndarray:
    """`nbytes` of fresh host memory, page-aligned, every page written (as the allocator's staging
    pages are made)."""
    return faulted_pages(nbytes, PAGE)[1]  # the view keeps its allocation alive through `base`


def row(allocator: Any, size: int, threads: int, blocks: int) -> list[str]:
    """The GB/s cells of one block size and thread count (see the module docstring)."""
    from lazyfuel.backends.vulkan.memory import BUFFER_USAGE

    imports, n, cells = allocator.imports, threads * blocks, []

    def gbs(wall: float) -> str:
        return f"{n * size / wall / 1e9:.2f}"

    for use in (Use.UPLOAD, Use.DOWNLOAD):
        wall, made = at_once(threads, lambda i, use=use: [allocator.make_block(size, use)
                                                          for _ in range(blocks)])
        for block in (b for per_thread in made for b in per_thread):
            allocator.destroy_block(block)
        cells.append(gbs(wall))
    if imports is None:
        cells += ["not offered", "not offered"]
    else:
        def imported(arrays: list[np.ndarray]) -> list[Any]:
            return [imports.import_range(a.__array_interface__["data"][0], size, BUFFER_USAGE)
                    for a in arrays]

        wall, made = at_once(threads, lambda i: imported([touched(size) for _ in range(blocks)]))
        cells.append(gbs(wall))
        ready = [[touched(size) for _ in range(blocks)] for _ in range(threads)]
        wall, again = at_once(threads, lambda i: imported(ready[i]))
        cells.append(gbs(wall))
        for got in (g for per_thread in made + again for g in per_thread if g is not None):
            imports.release(got)
    wall, _ = at_once(threads, lambda i: [touched(size) for _ in range(blocks)])
    cells.append(gbs(wall))
    return cells


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mibs", default="16,64,128")
    parser.add_argument("--threads", default="1,4,16")
    parser.add_argument("--blocks", type=int, default=2, help="blocks each thread makes")
    args = parser.parse_args(argv)
    register()
    pool = get_pool()
    print(f"device: {pool.label}; transfer mode {pool.allocator.mode.value}; imports "
          f"{'offered' if pool.allocator.imports is not None else 'not offered'}; {os.cpu_count()} CPUs; "
          f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}\n")
    print("| MiB a block | threads | blocks | upload GB/s | download GB/s | import fresh GB/s | "
          "import touched GB/s | touch GB/s |\n|---|---|---|---|---|---|---|---|", flush=True)
    for mib in [int(m) for m in args.mibs.split(",")]:
        for threads in [int(t) for t in args.threads.split(",")]:
            cells = row(pool.allocator, mib << 20, threads, args.blocks)
            print(f"| {mib} | {threads} | {threads * args.blocks} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
