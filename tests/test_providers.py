"""`lazyfuel.providers`: the backends in rank order and the choices `--backend` takes, the default
registry built once from every registered document, which backends can run here (checked once,
silently) and, for a choice, the ones left out and why; forcing one that cannot run says why."""

from __future__ import annotations

import pytest

from lazyfuel.backends import catalog
from lazyfuel.contracts.model import Backend
from lazyfuel.providers import (
    BACKEND_CHOICES,
    CONTRACTS_DIR,
    available_backends,
    backend_priority,
    backend_usable,
    default_registry,
    documents,
    left_out,
    unusable_reason,
)
from lazyfuel.registry import Registry
from lazyfuel.registry.model import DEFAULT_ORIGIN


def test_backends_are_ranked_by_their_registrations_and_named_in_the_choices():
    ranked = backend_priority()
    assert ranked == tuple(info.backend for info in catalog.registered())
    ranks = [catalog.info(b).rank for b in ranked]
    assert ranks == sorted(ranks) and ranked[-1] is Backend.Cpu  # the numpy reference last
    assert BACKEND_CHOICES == ("auto", *(b.name.lower() for b in ranked))


def test_the_default_registry_holds_every_registered_document_once():
    registry = default_registry()
    assert default_registry() is registry
    shipped = {name for info in catalog.registered() for name in documents(info)}
    fresh = Registry()
    for name in sorted(shipped):
        fresh.load(CONTRACTS_DIR / name)
    assert {b.key for b in registry.bindings()} == {b.key for b in fresh.bindings()}
    assert {b.origin for b in registry.bindings()} == {DEFAULT_ORIGIN}


def test_auto_plans_over_every_usable_backend_in_rank_order():
    usable = available_backends("auto")
    assert usable == [b for b in backend_priority() if backend_usable(b)]
    assert Backend.Cpu in usable  # numpy always runs
    assert unusable_reason(Backend.Cpu) is None
    assert all(unusable_reason(b) is None for b in usable)


def test_auto_leaves_out_the_unusable_ones_saying_why():
    assert left_out("auto") == {b: f"not usable here: {unusable_reason(b)}" for b in backend_priority()
                                if not backend_usable(b)}


def test_a_forced_backend_is_the_only_one_and_the_others_are_left_out_by_it():
    assert available_backends("cpu") == [Backend.Cpu]
    assert left_out("cpu") == {b: "left out by LAZYFUEL_BACKEND=cpu" for b in backend_priority()
                               if b is not Backend.Cpu}


def test_the_choice_defaults_to_the_config(monkeypatch):
    monkeypatch.setenv("LAZYFUEL_BACKEND", "cpu")
    assert available_backends() == [Backend.Cpu] and Backend.Cpu not in left_out()


def test_forcing_a_backend_that_cannot_run_says_why():
    unusable = [b for b in backend_priority() if not backend_usable(b)]
    if not unusable:
        pytest.skip("every backend runs here")
    b = unusable[0]
    with pytest.raises(RuntimeError, match=rf"^backend {b} was forced \(LAZYFUEL_BACKEND={b.name.lower()}\) "
                                           rf"but cannot run here: "):
        available_backends(b.name.lower())


def test_an_unknown_choice_names_the_accepted_ones():
    with pytest.raises(ValueError, match=r"LAZYFUEL_BACKEND='metal'; expected one of auto, "):
        available_backends("metal")
