"""Soak: many mixed select tasks on one device pool; host and device memory before and after.

The workload and the measurement are the soak test's (tests/reliability/soak.py): tasks of 110
fixed signatures (index_select, gather, masked_fill, contiguous of views, fused chains; every
dtype; host views strided, reversed, offset, broadcast) with fresh random data each, run from
`--threads` threads through the Vulkan executor, every result checked bit for bit against
numpy. After `--warmup` tasks the host RSS and `pool.resources()` are taken, then `--tasks`
tasks run, then both again. For each transfer mode in `--modes` (`default`: the pool's own;
`staged`, `import`, `zero-copy`: an allocator of that mode importing every array it can) it
prints one line: tasks/s, RSS start -> end and growth, each pool resource start -> end, the
validation messages (with `LAZYFUEL_VALIDATION=sync` set). `--signatures 0` gives every task a
new random signature instead (most tasks then plan anew and the planner's cache of 4096 plans
fills; with `--warmup 6000` it is full before the soak starts). Exit status 1 when a resource
did not come back or RSS grew by 5 % or more.

    python benchmarks/probes/soak.py                         # 10,000 tasks, default transfer mode
    python benchmarks/probes/soak.py --tasks 50000 --modes default,staged,import,zero-copy
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from datetime import UTC, datetime

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))  # the repository root

from lazyfuel.backends.vulkan import get_pool, register
from lazyfuel.backends.vulkan.memtypes import Mode
from lazyfuel.backends.vulkan.transfer import in_mode
from tests.reliability.soak import soak


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--warmup", type=int, default=3000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--modes", default="default", help="default,staged,import,zero-copy")
    parser.add_argument("--signatures", type=int, default=110,
                        help="fixed task signatures; 0: a new random one per task (plans evicted)")
    args = parser.parse_args(argv)
    register()
    pool = get_pool()
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {pool.label}; {platform.platform()}; "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; "
          f"LAZYFUEL_VALIDATION={os.environ.get('LAZYFUEL_VALIDATION', '')!r}")
    failed = False
    for name in args.modes.split(","):
        name = name.strip()
        if name == "default":
            report = soak(pool, args.tasks, args.threads, args.warmup, signatures=args.signatures or None)
        else:
            with in_mode(pool, Mode.parse(name), import_min=0):
                report = soak(pool, args.tasks, args.threads, args.warmup,
                              signatures=args.signatures or None)
        bad = report.leaks() or report.rss_growth >= 0.05 or report.validation_messages
        failed = failed or bool(bad)
        print(f"{name}: {report}{'  <- FAILED' if bad else ''}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
