"""Programs of one submit of a batch (`VulkanExecutor.run_resident_many` / `run_many`, cut into
submits of `executor.PROGRAMS_PER_SUBMIT`) share ONE status buffer (`executor._Status`): each
program's steps write their own words of it, so a bad index in one step of one program is named
with that program's value, position and axis, and a clean batch gives numpy's bits (issue 18,
W3). Run with device memory mapped (lavapipe) and again staged, as a discrete GPU's is (the status
fill and read back then are transfer commands), and with 1, 2 and all programs per submit."""

from __future__ import annotations

import numpy as np
import pytest
from vulkan_helpers import ProgramBuilder

import lazyfuel as lf
from lazyfuel.backends.vulkan.memtypes import Mode
from lazyfuel.backends.vulkan.transfer import in_mode
from lazyfuel.dtypes import DType


@pytest.fixture(params=[1, 2, 1 << 20], autouse=True)
def per_submit(request, monkeypatch) -> int:
    """Programs per submit: one (the default), pairs, or the whole batch in one."""
    from lazyfuel.backends.vulkan import executor

    monkeypatch.setattr(executor, "PROGRAMS_PER_SUBMIT", request.param)
    return request.param


@pytest.fixture(params=["mapped", "staged"])
def transfers(pool, request):
    """Device memory as lavapipe's (mapped), or unmapped: every fill and read back staged."""
    if request.param == "mapped":
        yield pool
        return
    with in_mode(pool, Mode.STAGED, import_min=0) as allocator:
        assert not allocator.direct
        yield pool


def _two_selects(rng: np.random.Generator, bad: int | None = None):
    """A program of two index_select steps (10 rows -> 6 -> 4), its inputs, and numpy's result;
    `bad`: the position of the second step's indices set to 99 (out of range for 6 rows)."""
    x = rng.standard_normal((10, 8)).astype(np.float32)
    first = rng.integers(0, 10, 6).astype(np.uint32)
    second = rng.integers(0, 6, 4).astype(np.uint32)
    if bad is not None:
        second[bad] = 99
    b = ProgramBuilder(x, first, second)
    rows = b.index_select(0, x.shape, DType.F32, 0, 1, 6)
    out = b.index_select(rows, (6, 8), DType.F32, 0, 2, 4)
    return b.program((out,)), b.inputs, x[first][second] if bad is None else None


@pytest.mark.parametrize("keep", [True, False])
def test_a_bad_index_in_one_program_of_a_batch_is_that_programs(executor, transfers, keep):
    rng = np.random.default_rng()
    runs = [_two_selects(rng, bad=2 if j == 2 else None) for j in range(4)]
    run = executor.run_resident_many if keep else executor.run_many
    with pytest.raises(IndexError, match=r"index 99 at position 2 of the indices is out of range for an "
                                         r"axis of size 6"):
        run([(program, inputs) for program, inputs, _ in runs])


@pytest.mark.parametrize("keep", [True, False])
def test_a_clean_batch_gives_numpy_bits_and_downloads_no_status(executor, transfers, keep, per_submit):
    rng = np.random.default_rng()
    runs = [_two_selects(rng) for _ in range(5)]
    run = executor.run_resident_many if keep else executor.run_many
    with lf.profile() as p:
        got = run([(program, inputs) for program, inputs, _ in runs])
    assert p.programs == 5 and p.submits == -(-5 // per_submit)
    assert p.bytes_downloaded == (0 if keep else sum(w.nbytes for _, _, w in runs))
    for result, (_, _, want) in zip(got, runs):
        assert np.asarray(result).tobytes() == want.tobytes()


def test_each_batchs_results_are_unpinned_once_its_fence_is_waited_on(executor, transfers, per_submit,
                                                                      monkeypatch):
    """`run_resident_many` settles (`ResidentBlock.done`: unpins, the store back under its budget)
    each submit's kept results right after that submit's fence, not all of them after the last
    fence: the bookkeeping of every batch but the last runs while the device runs the later ones
    (issue 18, W3: the time after the last fence). The order is watched through the real
    `Batch.finish` and `ResidentStore.settle`; the results are numpy's bits."""
    from lazyfuel.backends.vulkan.batch import Batch
    from lazyfuel.backends.vulkan.resident_store import ResidentStore

    events: list[str] = []
    real_finish, real_settle = Batch.finish, ResidentStore.settle

    def finish(self):
        real_finish(self)
        events.append("fence")

    def settle(self, slot):
        events.append("settled")
        real_settle(self, slot)

    monkeypatch.setattr(Batch, "finish", finish)
    monkeypatch.setattr(ResidentStore, "settle", settle)
    rng = np.random.default_rng()
    runs = [_two_selects(rng) for _ in range(5)]
    got = executor.run_resident_many([(program, inputs) for program, inputs, _ in runs])
    want: list[str] = []
    for first in range(0, 5, min(per_submit, 5)):
        want += ["fence"] + ["settled"] * len(range(first, min(first + per_submit, 5)))
    assert events == want
    for result, (_, _, expected) in zip(got, runs):
        assert np.asarray(result).tobytes() == expected.tobytes()
