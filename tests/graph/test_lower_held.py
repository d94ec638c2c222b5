"""`lower_into` hands chunks it already holds (views of a numpy array) to the tasks as they are:
no source tasks for the scheduler, one spanning view per set of parts, recipes made in the tasks
when a group reads held chunks only; graphs with chunks it does not hold still read them by key.
Every result is compared bit for bit with numpy."""

from __future__ import annotations

import dask
import dask.array as da
import dask.local
import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel.api import DefaultRuntime
from lazyfuel.graph import task as task_module
from lazyfuel.graph import task_inputs
from lazyfuel.graph.lower import lower_into


def _graph(y: lf.Array, into: np.ndarray) -> tuple[dict, list]:
    found = lower_into(y._node, DefaultRuntime.current(), into)
    assert found is not None
    return found


def test_held_chunks_leave_no_source_tasks_and_recipes_are_made_in_the_tasks(backend, bits_equal):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((64, 5)).astype(np.float32)
    idx = rng.integers(0, 64, 40)
    y = lf.index_select(lf.from_array(a, chunks=(8, 5)), 0, idx)
    into = np.full(y.shape, np.nan, np.float32)  # poisoned
    graph, keys = _graph(y, into)
    assert set(graph) == set(keys)  # only the output tasks: the chunks are in their arguments
    assert all(value[0] is task_module.store_made for value in graph.values())
    dask.local.get_sync(graph, keys)
    bits_equal(into, np.take(a, idx, axis=0))


def test_parts_of_one_buffer_are_spanned_once_for_every_task(backend, bits_equal, monkeypatch):
    calls = []
    real = task_module.spanning_view

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(task_module, "spanning_view", counted)
    monkeypatch.setattr(task_inputs, "spanning_view", counted)  # where `Gathered` spans in a task
    a = np.arange(32 * 3, dtype=np.int32).reshape(32, 3)
    idx = np.array([31, 0, 17, 9, 30, 1, 16, 8] * 4)  # every block hits all four chunks
    y = lf.index_select(lf.from_array(a, chunks=(8, 3)), 0, idx)
    into = np.empty(y.shape, y.dtype)
    graph, keys = _graph(y, into)
    dask.threaded.get(graph, keys, num_workers=2)
    assert len(y.chunks[0]) > 1 and len(calls) == 1
    bits_equal(into, np.take(a, idx, axis=0))


def test_held_and_keyed_chunks_mix(backend, bits_equal):
    """A numpy source (held) with a dask mask (read by key) and a dask source with numpy indices."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((12, 10))
    mask = rng.random((12, 10)) < 0.5
    y = lf.masked_fill(lf.from_array(a, chunks=(5, 4)), da.from_array(mask, chunks=(3, 10)), 2.5)
    into = np.empty(y.shape, y.dtype)
    graph, keys = _graph(y, into)
    assert any(k not in keys for k in graph)  # the mask's chunks are tasks of their own
    dask.local.get_sync(graph, keys)
    bits_equal(into, np.where(mask, 2.5, a))
    idx = rng.integers(0, 12, (7, 10))
    z = lf.gather(lf.from_array(da.from_array(a, chunks=(4, 10))), 0, idx)
    bits_equal(z.compute(), np.take_along_axis(a, idx, axis=0))


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_views_of_held_chunks_with_transposes_and_reversals(backend, bits_equal, scheduler):
    rng = np.random.default_rng(11)
    a = rng.integers(0, 255, (9, 14), dtype=np.uint8)
    idx = rng.integers(0, 14, 20)
    x = lf.from_array(a, chunks=(4, 3))
    y = lf.index_select(x.T[::-1], 0, idx)
    want = np.take(a.T[::-1], idx, axis=0)
    bits_equal(y.compute(scheduler=scheduler), want)
    bits_equal(dask.compute(y, scheduler=scheduler)[0], want)  # by keys, through to_dask
