"""The judge's persistent cache: one JSON file of judgements under the user's cache directory.

The directory is `$LAZYFUEL_CACHE_DIR` if set (tests point it at a temporary directory), else
`$XDG_CACHE_HOME/lazyfuel`, else `~/.cache/lazyfuel`; the file is `judge.json`. Writers take an
exclusive lock on `judge.lock`, re-read the file, merge and replace it atomically, so processes
measuring at the same time lose nothing and a reader never sees half a file. Storing a judgement
drops the entries it supersedes (same device, kernel_source, symbol and dtypes; another revision
or judge version): they can never be read again, since the key no longer matches. The devices'
transfer terms (`judge.transfers`) live in the same file under `transfers`, superseded alike
(same device, backend and transfer mode), and the kernels' launch shapes (`judge.shape_picks`) under
`tuning` (same device, backend and family).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lazyfuel.judge.model import JUDGE_VERSION, Judgement
from lazyfuel.judge.shape_picks import TuningPick, tuning_identity
from lazyfuel.judge.transfers import TransferJudgement, transfer_identity
from lazyfuel.settings import config

try:
    import fcntl
except ImportError:  # not POSIX: the atomic replace still keeps the file whole
    fcntl = None  # type: ignore[assignment]

FILE_NAME = "judge.json"
FORMAT = 1


def cache_dir() -> Path:
    """`lazyfuel.config.cache_dir`: `$LAZYFUEL_CACHE_DIR`, else `$XDG_CACHE_HOME/lazyfuel`, else
    `~/.cache/lazyfuel`."""
    return config.cache_dir


class JudgeCache:
    """Judgements by key, persisted in `directory / judge.json` (default: `cache_dir()`)."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else cache_dir()
        self.path = self.directory / FILE_NAME

    def __repr__(self) -> str:
        return f"JudgeCache({str(self.directory)!r})"

    def load(self) -> dict[str, Judgement]:
        """Every readable judgement of the current judge version, by key (empty if no file).

        A file that is not valid JSON, or an entry that does not parse, is ignored rather than
        trusted: the judge then measures again and rewrites it.
        """
        return {k: j for k, j in _entries(self._read()).items() if j.judge_version == JUDGE_VERSION}

    def get(self, key: str) -> Judgement | None:
        """The judgement stored under `key`, or None."""
        return self.load().get(key)

    def put(self, judgements: Iterable[Judgement]) -> None:
        """Store `judgements` (replacing what they supersede) in one locked, atomic update."""
        new = list(judgements)
        if not new:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        with self._locked():
            data = self._read()
            raw = data.get("judgements", {})
            replaced = {_identity(j) for j in new}
            kept = {k: v for k, v in raw.items()
                    if not isinstance(v, dict) or _raw_identity(v) not in replaced}
            kept.update({j.key: j.to_json() for j in new})
            self._write({**data, "format": FORMAT, "judgements": kept})

    def load_transfers(self) -> dict[str, TransferJudgement]:
        """Every readable transfer judgement of the current judge version, by key."""
        return self._load_section("transfers", TransferJudgement.from_json)

    def put_transfer(self, judgement: TransferJudgement) -> None:
        """Store a transfer judgement, replacing those of the same device, backend and mode."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with self._locked():
            data = self._read()
            mine = transfer_identity(judgement.backend, judgement.device_fingerprint, judgement.mode)
            kept = {k: v for k, v in data.get("transfers", {}).items() if not k.endswith("/" + mine)}
            kept[judgement.key] = judgement.to_json()
            self._write({**data, "format": FORMAT, "transfers": kept})

    def load_tuning(self) -> dict[str, TuningPick]:
        """Every readable launch-shape pick of the current judge version, by key."""
        return self._load_section("tuning", TuningPick.from_json)

    def put_tuning(self, picks: Iterable[TuningPick]) -> None:
        """Store `picks`, replacing those of the same device, backend and family."""
        new = list(picks)
        if not new:
            return
        with self._locked():
            data = self._read()
            replaced = {tuning_identity(p.backend, p.device_fingerprint, p.family) for p in new}
            kept = {k: v for k, v in data.get("tuning", {}).items()
                    if not any(f"/{mine}/" in k for mine in replaced)}
            kept.update({p.key: p.to_json() for p in new})
            self._write({**data, "format": FORMAT, "tuning": kept})

    def clear(self) -> None:
        """Forget every judgement (the file is removed)."""
        with self._locked():
            self.path.unlink(missing_ok=True)

    # -- file handling --------------------------------------------------------------------------
    def _load_section(self, section: str, parse: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
        """The entries of `section` that `parse` reads, whose key matches and whose judge version
        is the current one (the others are ignored, to be measured again)."""
        found = {}
        for key, value in self._read().get(section, {}).items():
            try:
                entry = parse(value)
            except (KeyError, TypeError, ValueError):
                continue
            if entry.key == key and entry.judge_version == JUDGE_VERSION:
                found[key] = entry
        return found

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) and data.get("format") == FORMAT else {}

    def _write(self, data: dict[str, Any]) -> None:
        fd, tmp = tempfile.mkstemp(prefix=".judge-", suffix=".json", dir=self.directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(data, out, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / "judge.lock", "a+") as lock:
            if fcntl is not None:
                fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                if fcntl is not None:
                    fcntl.flock(lock, fcntl.LOCK_UN)


def _entries(data: dict[str, Any]) -> dict[str, Judgement]:
    found = {}
    for key, value in data.get("judgements", {}).items():
        try:
            judgement = Judgement.from_json(value)
        except (KeyError, TypeError, ValueError):
            continue
        if judgement.key == key:
            found[key] = judgement
    return found


def _identity(j: Judgement) -> tuple[str, ...]:
    return (j.device_fingerprint, j.kernel_source, j.symbol, j.dtypes)


def _raw_identity(v: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(v.get(k)) for k in ("device_fingerprint", "kernel_source", "symbol", "dtypes"))
