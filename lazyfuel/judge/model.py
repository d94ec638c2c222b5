"""What the judge records: timed points, the fitted cost model of one binding, and its cache key.

A `Judgement` is one binding measured on one device: the median seconds of a one-step program at
each size of a ladder (`Point`s), and the straight line fitted through them,
`seconds = latency_s + bytes_moved * seconds_per_byte`, where `bytes_moved` is the binding's own
contract expression evaluated for the workload (so the planner evaluates the same quantity).
`dispatch_s` is what one more step of the same binding adds to a program at the smallest size: the
rest of `latency_s` (a submit and its wait, on a device) is paid once per program.

A binding timed on two views at each rung (the copy shader: a dense view at a start offset and a
transposed one) keeps the slower as its line, an upper bound for any view, and also the line of
the dense view alone (`dense_seconds_per_byte`), which prices a dense view (decisions 35, 38).

`clock` says what was timed: "wall", the whole run from host arrays to host arrays (Cpu, the FFT
providers), or "kernel", the device's own clock around the program's steps alone (Vulkan: GPU
timestamps after the uploads and before the downloads). A kernel-clocked binding's program pays
its transfers and its submit as the separate term `judge.transfers.TransferJudgement` measures.

A judgement is keyed by everything that may change the timing: the judge's version, the device
fingerprint (vendor, device, driver, UUID as the backend reports them), the kernel_source, the
symbol, the dtype key and the kernel's revision hash. Any change is a miss, never a stale hit.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import Any

from lazyfuel.registry.model import Binding

# 2: Contiguize is timed on a dense view at a start offset and a transposed one (the slower kept)
# 3: Vulkan bindings are timed by GPU timestamps around their steps (`clock` "kernel"); the
#    transfers of a program's inputs and results are a term of their own (`judge.transfers`)
JUDGE_VERSION = 3
# A measured spread below this is not trusted to separate two costs: ties are at least this wide.
NOISE_FLOOR = 0.03


@dataclass(frozen=True)
class Point:
    """One rung of the ladder: `n` output elements, `bytes_moved`, median seconds, relative spread."""

    n: int
    bytes_moved: float
    seconds: float
    spread: float
    repeats: int


@dataclass(frozen=True)
class Judgement:
    """The measured cost of one binding on one device (see the module docstring)."""

    key: str
    device_fingerprint: str
    kernel_source: str
    symbol: str
    dtypes: str
    revision_hash: str
    latency_s: float
    seconds_per_byte: float
    dispatch_s: float
    spread: float
    points: tuple[Point, ...]
    quick: bool
    measured_at: str
    clock: str = "wall"  # "wall" or "kernel" (see the module docstring)
    dense_seconds_per_byte: float | None = None  # the dense view's line, where two views were timed
    judge_version: int = JUDGE_VERSION

    @property
    def bytes_per_s(self) -> float:
        """The fitted bandwidth (inf when the fit found no per-byte cost)."""
        return 1.0 / self.seconds_per_byte if self.seconds_per_byte > 0 else float("inf")

    @property
    def program_overhead_s(self) -> float:
        """The part of `latency_s` a program pays once, whatever its number of steps."""
        return max(self.latency_s - self.dispatch_s, 0.0)

    def seconds(self, bytes_moved: float) -> float:
        """The fitted time of a one-step program moving `bytes_moved` bytes."""
        return self.latency_s + bytes_moved * self.seconds_per_byte

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict (`from_json` reads it back)."""
        out = asdict(self)
        out["points"] = [asdict(p) for p in self.points]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Judgement:
        """The judgement `to_json` wrote; KeyError / TypeError if the entry is malformed."""
        fields = dict(data)
        fields["points"] = tuple(Point(**p) for p in fields["points"])
        return cls(**fields)


def dtype_key(binding: Binding) -> str:
    """The binding's dtype key as written in the cache: `[F32,U32,F32]`."""
    return "[" + ",".join(d.name for d in binding.dtypes) + "]"


def fingerprint_id(device_fingerprint: str) -> str:
    """A short stable id of a device fingerprint (the fingerprint itself is stored alongside)."""
    return hashlib.sha256(device_fingerprint.encode()).hexdigest()[:12]


def identity(binding: Binding, device_fingerprint: str) -> str:
    """Everything of the key except the revision and the judge version: what a re-measure replaces."""
    return (f"{fingerprint_id(device_fingerprint)}/{binding.backend.name}/{binding.kernel_source}/"
            f"{binding.symbol}/{dtype_key(binding)}")


def judgement_key(binding: Binding, device_fingerprint: str) -> str:
    """The cache key of `binding` on the device `device_fingerprint` (see the module docstring)."""
    return f"v{JUDGE_VERSION}/{identity(binding, device_fingerprint)}/{binding.revision_hash}"
