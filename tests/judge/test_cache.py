"""The judge's cache: where it lives, what a key holds, superseded entries, restarts, bad files."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

from lazyfuel.judge import JUDGE_VERSION, JudgeCache, Judgement, Point, cache_dir, judgement_key
from lazyfuel.providers import default_registry

REPO = Path(__file__).resolve().parents[2]


def _binding(op: str = "IndexSelect", backend: str = "Cpu"):
    return next(b for b in default_registry().bindings()
                if b.op_kind.name == op and b.backend.name == backend and b.dtypes[0].name == "F32")


def _judgement(binding, fingerprint: str = "dev A", latency: float = 1e-4) -> Judgement:
    return Judgement(key=judgement_key(binding, fingerprint), device_fingerprint=fingerprint,
                     kernel_source=binding.kernel_source, symbol=binding.symbol, dtypes="[F32,U32,F32]",
                     revision_hash=binding.revision_hash, latency_s=latency, seconds_per_byte=1e-10,
                     dispatch_s=latency / 2, spread=0.05, points=(Point(256, 2048.0, latency, 0.05, 3),),
                     quick=True, measured_at="2026-11-29T00:00:00+00:00")


def test_cache_dir_honours_lazyfuel_cache_dir_then_xdg_then_home(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("LAZYFUEL_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("LAZYFUEL_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "lazyfuel"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "lazyfuel"


def test_key_names_every_part_that_changes_a_timing() -> None:
    b = _binding()
    key = judgement_key(b, "dev A")
    assert key.startswith(f"v{JUDGE_VERSION}/")
    for part in (b.backend.name, b.kernel_source, b.symbol, "[F32,U32,F32]", b.revision_hash):
        assert part in key
    assert judgement_key(b, "dev B") != key  # another device or driver: another key


def test_put_load_round_trip_and_supersede(cache: JudgeCache) -> None:
    b = _binding()
    old = _judgement(b)
    cache.put([old])
    assert cache.load() == {old.key: old}
    newer = replace(old, revision_hash="0123456789abcdef", key=old.key[:-16] + "0123456789abcdef")
    other_device = _judgement(b, fingerprint="dev B")
    cache.put([newer, other_device])
    stored = cache.load()
    assert set(stored) == {newer.key, other_device.key}  # the old revision is gone, not just shadowed
    data = json.loads(cache.path.read_text())
    assert data["format"] == 1 and len(data["judgements"]) == 2


def test_unreadable_file_or_entry_is_ignored_not_trusted(cache: JudgeCache) -> None:
    cache.directory.mkdir(parents=True, exist_ok=True)
    cache.path.write_text("{not json")
    assert cache.load() == {}
    good = _judgement(_binding())
    cache.put([good])  # rewrites the broken file
    data = json.loads(cache.path.read_text())
    data["judgements"]["v1/bogus"] = {"latency_s": "fast"}
    cache.path.write_text(json.dumps(data))
    assert cache.load() == {good.key: good}


_SCRIPT = textwrap.dedent("""
    import json, sys
    from lazyfuel.backends.base import executor
    from lazyfuel.contracts.model import Backend
    from lazyfuel.judge import Budget, Judge, JudgeCache
    from lazyfuel.backends.cpu import fingerprint as cpu_fingerprint
    from lazyfuel.providers import default_registry
    b = next(b for b in default_registry().bindings() if b.backend is Backend.Cpu
             and b.op_kind.name == "Gather" and b.dtypes[0].name == "F32")
    budget = Budget((256, 1024), 1, 2, 3, 0.0, 0.05)
    (v,) = Judge(executor(Backend.Cpu), cpu_fingerprint(), JudgeCache(), budget=budget).judge([b])
    print(json.dumps({"measured": v.measured, "key": v.judgement.key, "latency": v.judgement.latency_s}))
""")


def test_cache_survives_a_process_restart(tmp_path) -> None:
    env = {"LAZYFUEL_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}

    def run() -> dict:
        done = subprocess.run([sys.executable, "-c", _SCRIPT], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=120, check=True)
        return json.loads(done.stdout.strip().splitlines()[-1])

    first, second = run(), run()
    assert first["measured"] is True
    assert second == {**first, "measured": False}
    assert first["key"] in JudgeCache(tmp_path).load()
