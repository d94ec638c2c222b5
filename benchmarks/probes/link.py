"""What the host <-> device link moves through lazyfuel's Vulkan pool when no host copy is made.

The transfer benchmark's pipeline moves pageable numpy memory: every byte is copied by the CPU
into staging memory and out again (`staged`) or has its pages pinned by the driver per run
(`import`). This script separates the parts, each with `--threads` threads, each thread moving
`--mib` MiB per batch for `--batches` batches (GB/s = all bytes moved one way / wall):

- `memcpy`: the threads copying pageable numpy arrays into existing ones (np.copyto): the host's
  own copy bandwidth, which `staged` pays twice per byte;
- `vk driver memory`: vkCmdCopyBuffer between the driver's host memory (the allocator's upload /
  download staging types, page-locked by the driver) and device memory: up only, down only, and
  the round trip (up, barrier, down in one command buffer; GB/s of one direction's bytes);
  duplex = half the threads up and half down at the same time (GB/s of all bytes, both ways);
- `vk imported once`: the same from and into numpy arrays imported once before the clock starts
  (VK_EXT_external_memory_host), as pinned memory the user registered;
- `torch pinned`: the link as CUDA sees it (cudaMemcpy from page-locked memory), up, down, and
  both at once on two streams.

    python benchmarks/probes/link.py --threads 1,4,16 --mib 64 --batches 8
    python benchmarks/probes/link.py --family 1      # the pool on another queue family (copies only)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))  # the repository root
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))  # benchmarks/: threads.py

from threads import threaded  # the benchmarks' harness

from lazyfuel.backends.vulkan import get_pool

try:
    import torch
except ImportError:  # torch is optional: the link figures need CUDA
    torch = None


def best(fn: Callable[[], float], repeats: int) -> float:
    fn()  # warm-up
    return min(fn() for _ in range(repeats))


def memcpy_rate(threads: int, nbytes: int, batches: int, repeats: int) -> float:
    src = [np.ones(nbytes, np.uint8) for _ in range(threads)]
    dst = [np.ones(nbytes, np.uint8) for _ in range(threads)]

    def work(i: int) -> None:
        for _ in range(batches):
            np.copyto(dst[i], src[i])

    return threads * batches * nbytes / best(lambda: threaded(threads, work), repeats) / 1e9


def vk_rates(pool, threads: int, nbytes: int, batches: int, repeats: int, imported: bool) -> dict[str, float]:
    """up / down / round-trip GB/s with host memory from the driver or imported once."""
    allocator = pool.allocator
    keep, hosts_up, hosts_down = [], [], []
    for _ in range(threads):
        if imported:
            a, b = np.ones(nbytes, np.uint8), np.ones(nbytes, np.uint8)
            up, down = allocator.import_host(a), allocator.import_host(b)
            if up is None or down is None:
                return {}
            keep += [a, b]
        else:
            up, down = allocator.alloc(nbytes, staging=True), allocator.alloc(nbytes, download=True)
        hosts_up.append(up)
        hosts_down.append(down)
    devices = [allocator.alloc(nbytes) for _ in range(threads)]

    def run(i: int, what: str) -> None:
        if what == "duplex":  # even threads up, odd threads down, at the same time
            what = "up" if i % 2 == 0 else "down"
        for _ in range(batches):
            with pool.batch() as batch:
                if what in ("up", "round trip"):
                    batch.copy(hosts_up[i], 0, devices[i], 0, nbytes)
                    batch.barrier()
                if what in ("down", "round trip"):
                    batch.copy(devices[i], 0, hosts_down[i], 0, nbytes)
                batch.run()

    out = {}
    for what in ("up", "down", "round trip", "duplex"):
        if what == "duplex" and threads < 2:
            continue
        seconds = best(lambda what=what: threaded(threads, lambda i: run(i, what)), repeats)
        out[what] = threads * batches * nbytes / seconds / 1e9
    for allocation in hosts_up + hosts_down + devices:
        allocator.free(allocation)
    return out


def split_duplex(families: tuple[int, int], threads: int, nbytes: int, batches: int, repeats: int) -> float:
    """GB/s of all bytes (both ways) with half the threads uploading through a pool on queue
    family `families[0]` and half downloading through another pool on `families[1]`, at once:
    whether copies on two families run on two copy engines (full duplex)."""
    from lazyfuel.backends.vulkan import pool as pool_module

    pools = []
    for family in families:
        pool_module._compute_family = lambda physical, family=family: family
        pools.append(pool_module.DevicePool())
    half = max(threads // 2, 1)
    buffers = []
    for i in range(2 * half):
        pool = pools[i % 2]
        host = pool.allocator.alloc(nbytes, staging=i % 2 == 0, download=i % 2 == 1)
        buffers.append((pool, host, pool.allocator.alloc(nbytes)))

    def run(i: int) -> None:
        pool, host, device = buffers[i]
        for _ in range(batches):
            with pool.batch() as batch:
                if i % 2 == 0:
                    batch.copy(host, 0, device, 0, nbytes)
                else:
                    batch.copy(device, 0, host, 0, nbytes)
                batch.run()

    rate = 2 * half * batches * nbytes / best(lambda: threaded(2 * half, run), repeats) / 1e9
    for pool in pools:
        pool.close()
    return rate


def torch_rates(nbytes: int, batches: int, repeats: int) -> dict[str, float]:
    if torch is None or not torch.cuda.is_available():
        return {}
    host_up = torch.ones(nbytes, dtype=torch.uint8).pin_memory()
    host_down = torch.empty(nbytes, dtype=torch.uint8).pin_memory()
    dev_a = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dev_b = torch.ones(nbytes, dtype=torch.uint8, device="cuda")
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()

    def timed(what: str) -> float:
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(batches):
            if what in ("up", "both"):
                with torch.cuda.stream(s1):
                    dev_a.copy_(host_up, non_blocking=True)
            if what in ("down", "both"):
                with torch.cuda.stream(s2):
                    host_down.copy_(dev_b, non_blocking=True)
        torch.cuda.synchronize()
        return time.perf_counter() - start

    return {what: batches * nbytes / best(lambda what=what: timed(what), repeats) / 1e9
            for what in ("up", "down", "both")}


def _rates(rates: dict[str, float]) -> str:
    keys = ("up", "down", "round trip", "duplex")
    return " / ".join(f"{rates.get(k, 0):.2f}" for k in keys) if rates else "n/a"


def queue_families() -> str:
    import vulkan as vk
    pool = get_pool()
    lines = []
    for i, family in enumerate(vk.vkGetPhysicalDeviceQueueFamilyProperties(pool.physical)):
        bits = ((vk.VK_QUEUE_GRAPHICS_BIT, "graphics"), (vk.VK_QUEUE_COMPUTE_BIT, "compute"),
                (vk.VK_QUEUE_TRANSFER_BIT, "transfer"))
        flags = [name for bit, name in bits if family.queueFlags & bit]
        lines.append(f"family {i}: {'+'.join(flags)} x{family.queueCount}")
    return "; ".join(lines) + f" (the pool uses family {pool.queue_family}, {len(pool.queues)} queues)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", default="1,4,16")
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--family", type=int, help="queue family for the pool (default: the first with "
                        "compute; a transfer-only family runs only this script's copies)")
    parser.add_argument("--split-families", default="", help="e.g. '1,3;3,3': uploads on the first "
                        "family's pool while downloads run on the second's")
    args = parser.parse_args(argv)
    if args.family is not None:
        from lazyfuel.backends.vulkan import pool as pool_module
        pool_module._compute_family = lambda physical: args.family
    nbytes = args.mib << 20
    pool = get_pool()
    print(f"# {pool.info.name}; {queue_families()}; {args.mib} MiB per batch, {args.batches} batches per "
          f"thread, best of {args.repeats}; GB/s of one direction's bytes")
    print("| threads | memcpy | vk driver up / down / round trip / duplex "
          "| vk imported once up / down / round trip / duplex |")
    print("|---|---|---|---|")
    for threads in (int(t) for t in args.threads.split(",")):
        copy = memcpy_rate(threads, nbytes, args.batches, args.repeats)
        driver = vk_rates(pool, threads, nbytes, args.batches, args.repeats, imported=False)
        imported = vk_rates(pool, threads, nbytes, args.batches, args.repeats, imported=True)
        print(f"| {threads} | {copy:.2f} | {_rates(driver)} | {_rates(imported)} |", flush=True)
    for pair in filter(None, args.split_families.split(";")):
        families = tuple(int(f) for f in pair.split(","))
        rate = split_duplex(families, max(int(t) for t in args.threads.split(",")), nbytes, args.batches,
                            args.repeats)
        print(f"up on family {families[0]} and down on family {families[1]} (two pools) at once: "
              f"{rate:.2f} GB/s both ways together", flush=True)
    link = torch_rates(nbytes, args.batches * 4, args.repeats)
    if link:
        print(f"torch pinned: up {link['up']:.2f}, down {link['down']:.2f}, both at once "
              f"{link['both']:.2f} GB/s each way")
    return 0


if __name__ == "__main__":
    sys.exit(main())
