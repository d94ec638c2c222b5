"""The config object (`settings`): the environment read once until a reload, the defaults and the cache
directory, and a block's bad value refused when the block is made."""

from __future__ import annotations

import os

import pytest

import lazyfuel as lf


def test_the_environment_is_read_once_until_reload():
    with pytest.MonkeyPatch.context() as env:  # the plain monkeypatch: no reload of its own
        env.setenv("LAZYFUEL_CROSSING", "host")
        lf.config.reload()
        assert lf.config.crossing == "host"
        env.setenv("LAZYFUEL_CROSSING", "exported")
        assert lf.config.crossing == "host"  # read once
        lf.config.reload()
        assert lf.config.crossing == "exported"
    lf.config.reload()
    assert lf.config.crossing == os.environ.get("LAZYFUEL_CROSSING", "auto")


def test_defaults_and_the_cache_directory(monkeypatch, tmp_path):
    monkeypatch.delenv("LAZYFUEL_CACHE_DIR", raising=False)
    monkeypatch.delenv("LAZYFUEL_BACKEND", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert lf.config.backend == "auto" and lf.config.vulkan_queues is None
    assert lf.config.cache_dir == tmp_path / "xdg" / "lazyfuel"
    monkeypatch.setenv("LAZYFUEL_CACHE_DIR", str(tmp_path / "mine"))
    assert lf.config.cache_dir == tmp_path / "mine"
    with lf.config(cache_dir=tmp_path / "block"):
        from lazyfuel.judge.cache import JudgeCache

        assert JudgeCache().directory == tmp_path / "block"


def test_a_bad_block_value_is_refused_when_the_block_is_made():
    with pytest.raises(ValueError, match=r"lazyfuel.config: backend='metal' \(LAZYFUEL_BACKEND\); "
                                         r"expected one of auto, vulkan, cuda, opencl, cpu"):
        lf.config(backend="metal")
    with pytest.raises(ValueError, match=r"_force_wide=1; expected True or False"):
        lf.config(_force_wide=1)
    with pytest.raises(ValueError, match=r"_progress_after_s='soon'; expected a number of seconds >= 0"):
        lf.config(_progress_after_s="soon")
    with pytest.raises(TypeError, match=r"no knob 'backnd'; knobs: backend, device"):
        lf.config(backnd="cpu")
    with pytest.raises(AttributeError, match=r"no knob 'backnd'"):
        lf.config.backnd  # noqa: B018
    with pytest.raises(AttributeError, match=r"read-only; set backend for a block"):
        lf.config.backend = "cpu"
