"""The transfer term: what moving a program's host inputs in and its results out costs on a device.

A backend whose bindings are timed on the device's own clock (`Judgement.clock == "kernel"`:
Vulkan) leaves out of each binding's cost what a program pays around its steps: one submit and
its wait, the upload of each input's memory span, the download of each result. The judge times
those through the backend's `TransferProbe` (one batch moving host bytes the way the pool's
transfer mode moves a program's inputs and results) over a small ladder of sizes, and fits
`latency + bytes / bandwidth` for each direction. `TransferJudgement.seconds(up, down)` prices a
program's transfers:

    submit_s + Σ_inputs (up_fixed_s + bytes · up_seconds_per_byte)
             + Σ_results (down_fixed_s + bytes · down_seconds_per_byte)

where `submit_s` is an empty batch (submit, wait) and a direction's fixed cost per array is its
fitted latency less the submit, which a program pays once. Transfer judgements are cached with
the bindings' (`JudgeCache.load_transfers`), keyed by judge version, device fingerprint, backend
and transfer mode, so a change of any is a miss.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from lazyfuel.contracts.model import Backend
from lazyfuel.judge.model import JUDGE_VERSION, Point, fingerprint_id


@runtime_checkable
class TransferProbe(Protocol):
    """What the judge needs of an executor to measure its transfers."""

    backend: Backend

    @property
    def transfer_mode(self) -> str:
        """How the device reaches host arrays (e.g. `staged`, `zero-copy`): part of the key."""
        ...

    def time_transfer(self, upload: np.ndarray | None, result: np.ndarray | None) -> float:
        """Wall seconds of one batch uploading `upload` and downloading into `result` (None: none)."""
        ...


@dataclass(frozen=True)
class TransferJudgement:
    """The measured transfers of one backend's device in one transfer mode (module docstring)."""

    key: str
    device_fingerprint: str
    backend: str
    mode: str
    submit_s: float
    up_latency_s: float
    up_seconds_per_byte: float
    down_latency_s: float
    down_seconds_per_byte: float
    spread: float
    up_points: tuple[Point, ...]
    down_points: tuple[Point, ...]
    quick: bool
    measured_at: str
    judge_version: int = JUDGE_VERSION

    @property
    def up_fixed_s(self) -> float:
        """What each uploaded input adds beyond the program's one submit."""
        return max(self.up_latency_s - self.submit_s, 0.0)

    @property
    def down_fixed_s(self) -> float:
        """What each downloaded result adds beyond the program's one submit."""
        return max(self.down_latency_s - self.submit_s, 0.0)

    @property
    def up_bytes_per_s(self) -> float:
        """Host-to-device bandwidth (inf when the fit found no per-byte cost)."""
        return 1.0 / self.up_seconds_per_byte if self.up_seconds_per_byte > 0 else float("inf")

    @property
    def down_bytes_per_s(self) -> float:
        """Device-to-host bandwidth (inf when the fit found no per-byte cost)."""
        return 1.0 / self.down_seconds_per_byte if self.down_seconds_per_byte > 0 else float("inf")

    def seconds(self, up: Sequence[int], down: Sequence[int]) -> float:
        """A program's transfers: one submit, the inputs of `up` bytes each and the results of
        `down` bytes each (see the module docstring)."""
        return (self.submit_s + sum(self.up_fixed_s + b * self.up_seconds_per_byte for b in up)
                + sum(self.down_fixed_s + b * self.down_seconds_per_byte for b in down))

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict (`from_json` reads it back)."""
        out = asdict(self)
        out["up_points"] = [asdict(p) for p in self.up_points]
        out["down_points"] = [asdict(p) for p in self.down_points]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TransferJudgement:
        """The judgement `to_json` wrote; KeyError / TypeError if the entry is malformed."""
        fields = dict(data)
        for name in ("up_points", "down_points"):
            fields[name] = tuple(Point(**p) for p in fields[name])
        return cls(**fields)


def transfer_identity(backend: Backend | str, device_fingerprint: str, mode: str) -> str:
    """The key without the judge version: what a re-measure replaces."""
    name = backend.name if isinstance(backend, Backend) else backend
    return f"transfer/{fingerprint_id(device_fingerprint)}/{name}/{mode}"


def transfer_key(backend: Backend | str, device_fingerprint: str, mode: str) -> str:
    """The cache key of `backend`'s transfers on the device `device_fingerprint` in `mode`."""
    return f"v{JUDGE_VERSION}/{transfer_identity(backend, device_fingerprint, mode)}"
