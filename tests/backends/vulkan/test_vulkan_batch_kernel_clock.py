"""The kernel clock: GPU timestamps around a program's steps (after its uploads, before its
downloads), written only while a profile is active or the judge asks; and the transfer timing."""

from __future__ import annotations

import numpy as np
import pytest
from vulkan_helpers import ProgramBuilder, random_array, same_bits

import lazyfuel as lf
from lazyfuel.backends.vulkan.batch import Batch
from lazyfuel.backends.vulkan.dispatch import Recorder
from lazyfuel.backends.vulkan.transfer import in_mode
from lazyfuel.dtypes import DType


def _select(rows: int = 64):
    rng = np.random.default_rng(5)
    x = random_array(rng, DType.F32, (rows, 16))
    idx = rng.integers(0, rows, rows).astype(np.uint32)
    b = ProgramBuilder(x, idx)
    out = b.index_select(0, x.shape, DType.F32, 0, 1, rows)
    return b.program((out,)), b.inputs, x[idx]


def test_a_profile_records_kernel_seconds_within_device_seconds(executor) -> None:
    program, inputs, expected = _select()
    with lf.profile() as p:
        (got,) = executor.run(program, inputs)
    same_bits(got, expected)
    assert 0 < p.kernel_seconds <= p.device_seconds
    assert "in kernels" in str(p)


def test_without_a_profile_no_timestamp_is_written(executor, monkeypatch) -> None:
    begun = []
    original = Batch.kernels_begin
    monkeypatch.setattr(Batch, "kernels_begin", lambda self: (begun.append(1), original(self))[1])
    program, inputs, expected = _select()
    (got,) = executor.run(program, inputs)
    same_bits(got, expected)
    assert begun == []
    seconds = executor.time_kernels(program, inputs)
    assert begun == [1] and seconds is not None and seconds > 0


def test_the_clock_starts_after_uploads_and_stops_before_downloads(pool, executor, monkeypatch) -> None:
    """In staged mode inputs come in and results go out by buffer copies in the same command
    buffer: every upload copy is recorded before the first timestamp, every download after the
    second, the kernel between them. Here: x's short rows are copied in, the indices (read once)
    are read from their staging in place and the result is written into its download staging in
    place (issue 18), so the copies are x's upload and the status word's download."""
    events: list[str] = []
    for name in ("copy", "timestamp", "dispatch"):
        original = getattr(Recorder, name)
        monkeypatch.setattr(Recorder, name, lambda self, *a, _o=original, _n=name: (events.append(_n),
                                                                                  _o(self, *a))[1])
    program, inputs, _ = _select()
    try:
        with in_mode(pool, "staged"):
            seconds = executor.time_kernels(program, inputs)
    except ValueError as why:
        pytest.skip(f"no staged mode here: {why}")
    assert seconds is not None and seconds > 0
    assert events == ["copy", "timestamp", "dispatch", "timestamp", "copy"]


@pytest.mark.parametrize("mode", ["staged", "direct", "import", "zero-copy"])
def test_time_transfer_moves_bytes_in_the_pools_mode(pool, executor, mode) -> None:
    try:
        with in_mode(pool, mode, import_min=0):
            assert executor.transfer_mode == mode
            back = np.empty(1 << 16, np.uint8)
            times = [executor.time_transfer(None, None),
                     executor.time_transfer(np.full(1 << 16, 3, np.uint8), None),
                     executor.time_transfer(None, back)]
    except ValueError as why:
        pytest.skip(f"no {mode} mode here: {why}")
    assert all(t > 0 for t in times)
