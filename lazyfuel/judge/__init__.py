"""The judge: measures each binding's cost on the current device and caches it by revision + device.

- `Judge(runner, device_fingerprint, cache, quick=...)`: times real Programs over a ladder of sizes
  and fits `latency + bytes / bandwidth` (plus the per-dispatch cost); `Judge.judge(bindings)`
  returns a `Verdict` per binding, measuring only what the cache does not hold.
- `JudgeCache`: the JSON file under `$LAZYFUEL_CACHE_DIR`, `$XDG_CACHE_HOME/lazyfuel` or
  `~/.cache/lazyfuel`, keyed by judge version, device fingerprint, kernel_source, symbol, dtypes
  and revision hash.
- `TransferJudgement`: a device's measured transfers (submit, upload, download lines), the term a
  program on a kernel-clocked backend (Vulkan) pays besides its steps (`judge.transfers`).
- `TuningTarget`, `TuningPick` (`judge.shape_picks`): `Judge.tune` picks a kernel family's launch shape
  (workgroup size x elements per invocation) among a few candidates around the device kind's
  default, keeping the default unless another is faster by more than the noise; cached alike.
- `MeasuredCosts`: the planner's `CostModel` built from the cache
  (`Planner(registry, backends, costs=MeasuredCosts.load(...))`).

This layer sits below the backends: the caller injects each backend's executor and device
fingerprint (`lazyfuel.judged_costs` does it for the built-in backends).
"""

from lazyfuel.judge.binding_timing import FULL, QUICK, Budget, Judge, KernelTimer, Runner, Verdict, fit_line
from lazyfuel.judge.cache import JudgeCache, cache_dir
from lazyfuel.judge.costs import MeasuredCosts, UnmeasuredCostWarning
from lazyfuel.judge.model import JUDGE_VERSION, Judgement, Point, judgement_key
from lazyfuel.judge.progress import Progress
from lazyfuel.judge.shape_picks import TuningPick, TuningTarget, cached_picks, neighbours
from lazyfuel.judge.transfers import TransferJudgement, TransferProbe, transfer_key

__all__ = [
    "FULL",
    "JUDGE_VERSION",
    "QUICK",
    "Budget",
    "Judge",
    "JudgeCache",
    "Judgement",
    "KernelTimer",
    "MeasuredCosts",
    "Point",
    "Progress",
    "Runner",
    "TransferJudgement",
    "TransferProbe",
    "TuningPick",
    "TuningTarget",
    "UnmeasuredCostWarning",
    "Verdict",
    "cache_dir",
    "cached_picks",
    "fit_line",
    "judgement_key",
    "neighbours",
    "transfer_key",
]
