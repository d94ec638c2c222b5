"""SIGKILL a real writer at random moments and right after zarr metadata appears (issue 16, #3, #4).

Each writer is a child forked by one `kill_zygote.py` process (started once per test), killed by
this process with SIGKILL: `Array.to_zarr` writing a 16-chunk store, and `lazyfuel run` writing a
zarr and a .npy output (and sometimes first its `generate:` input). Two windows: a uniformly
random moment of the write, and the moment new zarr metadata (a `zarr.json`) appears in the output
folder, where before issue 16 lazyfuel had not yet marked the array incomplete. After every kill:
each output either does not read as complete (`lf.from_zarr` raises, or nothing is there) or is
exactly one of the two results the runs write (bitwise); an output that existed before the kill
still reads exactly; the next run removes what the killed one left beside its outputs. Writers run
on the cpu backend (the device is not what is tested; forked children start fast without Vulkan).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel import publish
from lazyfuel.completion import IncompleteStoreError
from lazyfuel.integrity import DamagedStoreError
from lazyfuel.pipeline import build, load_graph
from reliability.kill_zygote import expected

KILLS = 20  # kills that land (the child was still writing) per window and writer
NOT_COMPLETE = (IncompleteStoreError, DamagedStoreError, FileNotFoundError)


class Zygote:
    """The forking process; `start(job)` forks a writer and returns its pid, `wait()` its status."""

    def __init__(self, log: Path) -> None:
        root = Path(lf.__file__).resolve().parents[1]
        env = {**os.environ, "PYTHONPATH": str(root), "LAZYFUEL_BACKEND": "cpu"}
        self.log = log.open("w")
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("kill_zygote.py"))],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     text=True, env=env, cwd=root)

    def start(self, job: dict) -> int:
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        return int(self._line("pid"))

    def wait(self) -> int:
        return int(self._line("status"))

    def _line(self, word: str) -> str:
        line = self.proc.stdout.readline()
        assert line.startswith(word), f"zygote said {line!r}; its stderr: {Path(self.log.name).read_text()}"
        return line.split()[1]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.log.close()


@pytest.fixture
def zygote(tmp_path):
    z = Zygote(tmp_path / "zygote.log")
    yield z
    z.close()


def new_metadata(folder: Path, names: list[str], absent: set[str]) -> bool:
    """Whether zarr metadata has appeared for one of `names`: in a temporary folder beside it, or at
    the name itself when nothing was there before the run (`absent`)."""
    for entry in os.scandir(folder):
        for name in names:
            if entry.name.startswith(f".{name}.tmp-") or (entry.name == name and name in absent):
                if os.path.exists(os.path.join(entry.path, "zarr.json")):
                    return True
    return False


@dataclass
class Tally:
    landed: int = 0  # kills that hit a running writer
    finished: int = 0  # writers done before the kill
    wrong: list[str] = field(default_factory=list)  # read as complete, not exactly a written result
    destroyed: list[str] = field(default_factory=list)  # an output that existed is unreadable or gone
    refused: int = 0  # outputs that did not read as complete after a kill

    def ok(self) -> bool:
        return not self.wrong and not self.destroyed


def kill(zygote: Zygote, job: dict, window: str, folder: Path, names: list[str], duration: float,
         rng: random.Random) -> bool:
    """Run `job` and SIGKILL it in `window`; whether the kill landed (the writer was running)."""
    absent = {n for n in names if not (folder / n).exists()}
    pid = zygote.start(job)
    if window == "random":
        time.sleep(rng.uniform(0, duration))
    else:
        deadline = time.perf_counter() + 30
        while not new_metadata(folder, names, absent):
            if not publish.process_alive(pid) or time.perf_counter() > deadline:
                break
        spin = time.perf_counter() + rng.uniform(0, 0.002)  # 0-2 ms into the window
        while time.perf_counter() < spin:
            pass
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    status = zygote.wait()
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
        return True
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, \
        f"the writer failed (status {status}): {Path(zygote.log.name).read_text()[-3000:]}"
    return False


def check_zarr(path: Path, existed: bool, allowed: list[np.ndarray], tally: Tally) -> None:
    """`path` does not read as complete (allowed only if nothing was there before) or reads as
    exactly one of `allowed`."""
    try:
        got = lf.from_zarr(path).compute(scheduler="sync")
    except NOT_COMPLETE as err:
        tally.refused += 1
        if existed:
            tally.destroyed.append(f"{path.name}: {type(err).__name__}: {err}")
        return
    if not any(got.shape == a.shape and np.array_equal(got, a) for a in allowed):
        tally.wrong.append(f"{path.name}: read as complete, {np.sum(got != allowed[-1])} elements differ")


def check_npy(path: Path, existed: bool, allowed: list[np.ndarray], tally: Tally) -> None:
    if not path.exists():
        tally.refused += 1
        if existed:
            tally.destroyed.append(f"{path.name}: gone")
        return
    got = np.load(path)
    if not any(got.shape == a.shape and np.array_equal(got, a) for a in allowed):
        tally.wrong.append(f"{path.name}: {np.sum(got != allowed[-1])} elements differ")


def leftovers(folder: Path) -> list[str]:
    """What writers left beside their outputs (temporary names, old copies)."""
    return sorted(e.name for e in folder.iterdir() if ".tmp-" in e.name or ".old-" in e.name)


def with_a_leftover(folder: Path, target: str) -> list[str]:
    """The leftovers in `folder`; where the kills happened to leave none (a kill before the
    writer made anything, or the next writer cleaned it), one of a dead writer is planted, so the
    last run's cleaning is always checked."""
    if not leftovers(folder):
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        (folder / f".{target}.tmp-{dead.pid}-0").mkdir()
    return leftovers(folder)


def timed(zygote: Zygote, job: dict) -> float:
    started = time.perf_counter()
    zygote.start(job)
    assert zygote.wait() == 0, Path(zygote.log.name).read_text()
    return time.perf_counter() - started


@pytest.mark.parametrize("window", ["random", "metadata"])
def test_killed_to_zarr_never_leaves_a_wrong_or_destroyed_store(zygote, tmp_path, window):
    rng = random.Random(16)
    out = tmp_path / "out.zarr"
    old, new = expected(1), expected(2)
    duration = min(timed(zygote, {"job": "to_zarr", "path": str(out), "seed": 2, "overwrite": True})
                   for _ in range(2))
    saved = tmp_path / "saved" / "out.zarr"
    lf.from_array(old, chunks=(64, 64)).to_zarr(saved)
    tally = Tally()
    for attempt in range(10 * KILLS):
        if tally.landed >= KILLS:
            break
        existed = attempt % 2 == 1  # odd attempts: an old store is there and must survive
        publish.remove(out)
        if existed:
            shutil.copytree(saved, out)
        job = {"job": "to_zarr", "path": str(out), "seed": 2, "overwrite": existed}
        if kill(zygote, job, window, tmp_path, ["out.zarr"], duration, rng):
            tally.landed += 1
        else:
            tally.finished += 1
        check_zarr(out, existed, [old, new] if existed else [new], tally)
    assert tally.landed >= KILLS, tally
    assert tally.ok(), tally
    publish.remove(out)
    assert with_a_leftover(tmp_path, out.name)
    timed(zygote, {"job": "to_zarr", "path": str(out), "seed": 2, "overwrite": False})
    assert leftovers(tmp_path) == [] and np.array_equal(lf.from_zarr(out).compute(), new)
    print(f"to_zarr, {window}: {tally}")


GRAPH = """
params: {seed: 1}
inputs:
  x: {zarr: in.zarr, generate: {shape: [1024, 64], chunks: [64, 64], seed: 7}}
  i: {indices: {shape: [1024], high: 1024, seed: $seed, chunks: 128}}
steps:
  - {name: y, op: index_select, x: x, dim: 0, indices: i}
outputs:
  - {value: y, zarr: out.zarr}
  - {value: y, npy: out.npy}
"""


@pytest.mark.parametrize("window", ["random", "metadata"])
def test_killed_lazyfuel_run_never_leaves_a_wrong_or_destroyed_output(zygote, tmp_path, window):
    rng = random.Random(17)
    graph = tmp_path / "graph.yaml"
    graph.write_text(GRAPH)
    store, npy, out = tmp_path / "in.zarr", tmp_path / "out.npy", tmp_path / "out.zarr"
    results = {s: build(load_graph(graph, {"seed": str(s)}), write_stores=False).values["y"].compute()
               for s in (1, 2)}
    table = build(load_graph(graph), write_stores=False).values["x"].compute()

    def job(seed: int) -> dict:
        return {"job": "run", "argv": ["run", "--backend", "cpu", "--no-progress", "--set", f"seed={seed}",
                                       str(graph)]}

    duration = min(timed(zygote, job(1)) for _ in range(2))
    saved = tmp_path / "saved"
    saved.mkdir()
    for path in (out, npy):
        path.rename(saved / path.name)
    tally = Tally()
    for attempt in range(10 * KILLS):
        if tally.landed >= KILLS:
            break
        if attempt % 4 == 0:
            publish.remove(store)  # this run generates its input first
        existed = attempt % 2 == 1  # odd attempts: an earlier run's outputs are there
        for path in (out, npy):
            publish.remove(path)
        if existed:
            shutil.copytree(saved / out.name, out)
            shutil.copy(saved / npy.name, npy)
        input_existed = store.exists()
        if kill(zygote, job(2), window, tmp_path, ["out.zarr", "in.zarr"], duration, rng):
            tally.landed += 1
        else:
            tally.finished += 1
        allowed = [results[1], results[2]] if existed else [results[2]]
        check_zarr(out, existed, allowed, tally)
        check_npy(npy, existed, allowed, tally)
        check_zarr(store, input_existed, [table], tally)
    assert tally.landed >= KILLS, tally
    assert tally.ok(), tally
    assert with_a_leftover(tmp_path, out.name)
    publish.remove(store)  # so the last run writes every output and its input again
    timed(zygote, job(2))
    assert leftovers(tmp_path) == [], leftovers(tmp_path)
    np.testing.assert_array_equal(np.load(npy), results[2])
    np.testing.assert_array_equal(lf.from_zarr(out).compute(), results[2])
    print(f"lazyfuel run, {window}: {tally}")
