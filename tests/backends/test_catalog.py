"""Backends register themselves (`lazyfuel.backends.catalog`): what each built-in package registers,
that the layers above read it from there, and that no layer above `backends/` names a concrete
backend outside the few places listed here."""

from __future__ import annotations

import os
import pkgutil
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import lazyfuel
import lazyfuel.backends
from lazyfuel.backends import catalog
from lazyfuel.backends.catalog import BackendInfo
from lazyfuel.contracts.model import Backend
from lazyfuel.graph import crossing
from lazyfuel.judged_costs import device_fingerprint
from lazyfuel.providers import BACKEND_CHOICES, CONTRACTS_DIR, backend_priority, default_registry

PACKAGE = Path(lazyfuel.__file__).parent
V, C, CL, CPU = Backend.Vulkan, Backend.Cuda, Backend.OpenCL, Backend.Cpu


def test_every_backend_package_registers_itself_and_the_tie_order_is_their_rank():
    packages = {m.name for m in pkgutil.iter_modules(lazyfuel.backends.__path__) if m.ispkg}
    assert packages == {"cpu", "vkfft", "vulkan"}
    infos = catalog.registered()
    assert {i.plug_in.__module__.rsplit(".", 1)[-1] for i in infos} == packages
    assert [i.backend for i in infos] == [V, C, CL, CPU] == list(backend_priority())
    assert BACKEND_CHOICES == ("auto", "vulkan", "cuda", "opencl", "cpu")


def test_the_default_registry_holds_each_backends_own_documents():
    bindings = default_registry().bindings()
    for found in catalog.registered():
        assert found.documents, found.backend
        for name in found.documents:
            assert (CONTRACTS_DIR / name).is_file(), name
        assert any(b.backend is found.backend for b in bindings), found.backend


def test_device_pairing_fingerprints_and_memory_helpers_come_from_the_packages():
    assert crossing.device_pairs() == catalog.device_pairs() == {(V, C)}
    assert crossing.exports(V) and not crossing.exports(C) and not crossing.exports(None)
    assert catalog.info(V).pinned is not None and catalog.info(V).devices is not None
    assert all(catalog.info(b).pinned is None for b in (C, CL, CPU))
    assert device_fingerprint(CPU).startswith("Cpu | ")
    assert catalog.info(CPU).fingerprint() == device_fingerprint(CPU)


def test_registering_a_backend_twice_differently_is_refused():
    cpu = catalog.info(CPU)
    catalog.register(cpu)  # the same info again: nothing changes
    assert catalog.info(CPU) is cpu
    with pytest.raises(ValueError, match=r"backend Cpu is already registered \(by lazyfuel\.backends\.cpu\); "
                                         "cannot register it again differently"):
        catalog.register(replace(cpu, rank=0))
    assert catalog.info(CPU) is cpu


def test_a_registered_backend_is_ranked_paired_and_asked_for_memory_by_its_info(monkeypatch):
    """What the catalog answers follows the infos alone: a Cpu info ranked first that shares memory
    with OpenCL and has page-locked memory changes the tie order, the pairs and `lf.empty_pinned`."""
    made: list[int] = []

    def pinned(nbytes: int):
        import numpy as np

        made.append(nbytes)
        return np.zeros(nbytes, np.uint8)

    infos = dict(catalog._infos)
    infos[CPU] = replace(infos[CPU], rank=0, shares_memory_with=(CL,), pinned=pinned)
    monkeypatch.setattr(catalog, "_infos", infos)
    assert backend_priority()[0] is CPU
    assert catalog.device_pairs() == {(V, C), (CPU, CL)}
    assert crossing.may_hand_over(CPU, CL)
    assert lazyfuel.empty_pinned((3, 4), "float32").shape == (3, 4) and made == [48]


def test_asking_for_an_unregistered_backend_names_the_registered_ones(monkeypatch):
    monkeypatch.setattr(catalog, "_infos", {CPU: catalog.info(CPU)})
    with pytest.raises(LookupError, match=r"no backend package registers Vulkan; registered: Cpu"):
        catalog.info(V)
    with pytest.raises(RuntimeError, match="no registered backend provides page-locked host memory"):
        catalog.pinned_host(16)
    assert catalog.listed_devices() == []


# No layer above backends/ names a concrete backend (issue 17 item 3): each backend's priors, its
# kernel-shape tuning, its devices and its device-resident result class come from its BackendInfo.
STILL_NAMED: dict[str, int] = {}


def test_no_layer_above_backends_names_a_concrete_backend_beyond_the_listed_places():
    named = re.compile(r"Backend\.(Vulkan|Cpu|Cuda|OpenCL)\b")
    found = {}
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith("backends/"):
            continue
        count = len(named.findall(path.read_text(encoding="utf-8")))
        if count:
            found[relative] = count
    assert found == STILL_NAMED


# Imports of a concrete backend package above backends/: none (dask.distributed's worker pinning
# asks the catalog for a backend with devices, `catalog.pinnable`; the audit's references are the
# op specs', `lazyfuel.ops`).
STILL_IMPORTED: dict[str, int] = {}


def test_no_layer_above_backends_imports_a_backend_package_beyond_the_listed_places():
    named = re.compile(r"^\s*(?:from|import) lazyfuel\.backends\.(?:vulkan|cpu|vkfft)\b", re.M)
    found = {}
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE).as_posix()
        if not relative.startswith("backends/"):
            count = len(named.findall(path.read_text(encoding="utf-8")))
            if count:
                found[relative] = count
    assert found == STILL_IMPORTED


def test_priors_tuning_devices_and_the_device_array_come_from_the_packages():
    assert catalog.info(CPU).in_host_memory and not catalog.info(V).in_host_memory
    assert catalog.device_prior(CPU).link is None and catalog.device_prior(V).link is not None
    assert catalog.info(V).tuning is not None and catalog.info(CPU).tuning is None
    assert lazyfuel.DeviceArray is catalog.device_array_type()
    assert lazyfuel.DeviceArray.__module__.startswith("lazyfuel.backends.")
    assert catalog.backend_choices() == BACKEND_CHOICES
    assert catalog.choose_device().index == lazyfuel.devices()[0].index or len(lazyfuel.devices()) > 1


def test_a_backend_info_is_plain_data():
    cpu = catalog.info(CPU)
    assert isinstance(cpu, BackendInfo) and cpu.rank == 90 and cpu.documents == ("cpu.md",)


def test_a_new_backend_names_itself_from_its_own_package_in_a_fresh_process():
    # what a backends/<name>/__init__.py does: name its backend and register it; nothing above
    # backends/ (not even contracts/model.py's Backend enum) needs a line for it
    code = ("import pickle\nfrom lazyfuel.backends import catalog\n"
            "from lazyfuel.contracts.model import Backend\n"
            "toy = Backend.add('Toy')\n"
            "catalog.register(catalog.BackendInfo(toy, rank=50, documents=(), plug_in=lambda: None))\n"
            "assert Backend.Toy is toy is Backend.parse('Toy') and pickle.loads(pickle.dumps(toy)) is toy\n"
            "assert catalog.info(toy).rank == 50 and toy in [i.backend for i in catalog.registered()]\n"
            "assert 'toy' in catalog.backend_choices()\n"
            "assert Backend.add('Vulkan') is Backend.Vulkan\n")
    root = str(Path(lazyfuel.__file__).parents[1])
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": root})
    with pytest.raises(ValueError, match=r"^a Backend member is named by a public identifier, got '2x'$"):
        Backend.add("2x")


def test_workers_are_pinned_through_the_catalog(monkeypatch):
    found = catalog.pinnable()
    assert found.backend is Backend.Vulkan  # lavapipe here: the one backend with devices to pin
    assert found.spread_devices() == [d.index for d in catalog.listed_devices()][:len(found.spread_devices())]
    pool = found.default_pool()
    assert set(pool) == {"id", "index", "label"} and pool["id"] == found.default_pool()["id"]
    cpu = catalog.info(Backend.Cpu)
    monkeypatch.setattr(catalog, "registered", lambda: (cpu,))
    with pytest.raises(RuntimeError, match=r"^no registered backend has devices to pin dask workers to "
                                           r"\(registered: Cpu\)$"):
        catalog.pinnable()
