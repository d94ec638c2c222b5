"""`lazyfuel.runtime`: what a lowered graph's tasks plan and run under. `DefaultRuntime` captures the
backend choice and the `lazyfuel.config` blocks open where the graph is lowered, names itself in
task keys by exactly those, travels by pickle, and re-opens the blocks in a task; `_planner` builds
one planner per backend choice and process, over the default registry."""

from __future__ import annotations

import pickle

import pytest
from dask.base import tokenize

import lazyfuel as lf
from lazyfuel.contracts.model import Backend
from lazyfuel.providers import default_registry
from lazyfuel.runtime import DefaultRuntime, _planner


def test_current_captures_the_backend_and_the_open_blocks_only(monkeypatch):
    monkeypatch.setenv("LAZYFUEL_BACKEND", "cpu")
    assert DefaultRuntime.current() == DefaultRuntime("cpu", ())
    with lf.config(read_budget=0.5):
        with lf.config(_force_wide=True):
            assert DefaultRuntime.current() == DefaultRuntime("cpu", (("_force_wide", True),
                                                                      ("read_budget", 0.5)))
    assert DefaultRuntime.current().overrides == ()


def test_applied_reopens_the_captured_values_and_closes_them_again():
    runtime = DefaultRuntime("cpu", (("read_budget", 0.125),))
    before = lf.config.read_budget
    with runtime.applied():
        assert lf.config.read_budget == 0.125
        assert lf.config.overrides() == (("read_budget", 0.125),)
    assert lf.config.read_budget == before and lf.config.overrides() == ()


def test_its_token_names_the_backend_and_the_overrides_and_nothing_else():
    a = DefaultRuntime("cpu", (("read_budget", 0.5),))
    assert tokenize(a) == tokenize(DefaultRuntime("cpu", (("read_budget", 0.5),)))
    assert a.__dask_tokenize__() == ("lazyfuel.DefaultRuntime", "cpu", "(('read_budget', 0.5),)")
    assert len({tokenize(a), tokenize(DefaultRuntime("cpu")), tokenize(DefaultRuntime("auto", a.overrides)),
                tokenize(DefaultRuntime("cpu", (("read_budget", 0.25),)))}) == 4


def test_it_travels_by_pickle_and_is_frozen():
    a = DefaultRuntime("vulkan", (("_force_wide", True),))
    assert pickle.loads(pickle.dumps(a)) == a
    with pytest.raises(AttributeError):
        a.backend = "cpu"  # type: ignore[misc]


def test_one_planner_per_choice_over_the_default_registry_whatever_the_case_of_the_name():
    cpu = DefaultRuntime("CPU").planner()
    assert cpu is DefaultRuntime("cpu").planner() is _planner("cpu")
    assert cpu.backends == (Backend.Cpu,)
    assert cpu.registry is default_registry()
    assert cpu.mention_left_out is False  # only `auto` mentions a backend it leaves out

