"""Link registries are found in a fresh process: loading a document into a new `Registry` needs
nothing built first (issue 15: it raised "link registry ... is not registered; registered: none")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
CONTRACTS = ROOT / "lazyfuel" / "contracts"


def _fresh(code: str, stdin: str = "") -> subprocess.CompletedProcess:
    """`code` run by a new interpreter importing this checkout's lazyfuel."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_RUNTIME_DIR=os.environ.get("XDG_RUNTIME_DIR", "/tmp"))
    return subprocess.run([sys.executable, "-c", code], input=stdin, capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)


@pytest.mark.parametrize("document", ["vulkan_select.md", "cpu.md", "vkfft.md"])
def test_load_contracts_into_a_new_registry_in_a_fresh_process(document: str) -> None:
    run = _fresh("import lazyfuel as lf\n"
                 f"bindings = lf.load_contracts({str(CONTRACTS / document)!r}, registry=lf.Registry())\n"
                 "print(len(bindings), lf.__file__)")
    assert run.returncode == 0, run.stderr
    count, module = run.stdout.split()
    assert int(count) > 0 and module.startswith(str(ROOT))


def test_the_registry_layer_alone_finds_them_too() -> None:
    run = _fresh("from lazyfuel.registry import Registry\n"
                 f"print(len(Registry().load({str(CONTRACTS / 'vulkan_select.md')!r})))")
    assert run.returncode == 0, run.stderr
    assert int(run.stdout) == 16


def test_an_unknown_link_registry_still_names_the_registered_ones() -> None:
    text = (CONTRACTS / "cpu.md").read_text(encoding="utf-8").replace(
        "lazyfuel::cpu::ENTRY_POINTS", "nobody::ENTRY_POINTS", 1)
    run = _fresh("import sys, lazyfuel as lf\n"
                 "try:\n"
                 "    lf.load_contracts(sys.stdin.read(), registry=lf.Registry())\n"
                 "except lf.ContractError as err:\n"
                 "    print(err)\n", stdin=text)
    assert "'nobody::ENTRY_POINTS' is not registered" in run.stdout
    assert "lazyfuel::cpu::ENTRY_POINTS" in run.stdout  # the registered ones are named
