"""Index inputs given in any checked integer dtype (`backends.base.input_fits`): the Cpu and Vulkan
executors run a program whose index input is U32 on int64, uint64, int32, int16 or uint8 indices
with the same bits as on U32 ones, a value changed to one past U32 after the check is still an
IndexError (narrowing saturates, it never wraps onto a valid index), and what is not an integer is
still refused."""

from __future__ import annotations

import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel.backends.base import executor, narrowed_indices
from lazyfuel.contracts.model import Backend
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.planner import Chain, OpNode, Planner
from lazyfuel.providers import available_backends, default_registry

BACKENDS = [b for b in (Backend.Cpu, Backend.Vulkan) if b in available_backends()]
INDEX_DTYPES = [np.int64, np.uint64, np.int32, np.int16, np.uint8, np.uint32]


def _program(op: str, backend: Backend, source: np.ndarray, indices: np.ndarray):
    chain = Chain(2, (OpNode(op, (0, 1), (("dim", 0),)),), (2,))
    return Planner(default_registry(), [backend]).plan(
        chain, [DType.from_numpy(source.dtype), DType.U32], [Layout.of(source), Layout.of(indices)])


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize("dtype", INDEX_DTYPES, ids=lambda d: np.dtype(d).name)
def test_any_checked_integer_indices_run_as_u32(backend, dtype):
    rng = np.random.default_rng(5)
    source = rng.standard_normal((200, 33), dtype=np.float32)
    rows = rng.integers(0, 200, 700)
    positions = rng.integers(0, 200, (90, 33))
    run = executor(backend).run
    (picked,) = run(_program("IndexSelect", backend, source, rows), [source, rows.astype(dtype)])
    (gathered,) = run(_program("Gather", backend, source, positions), [source, positions.astype(dtype)])
    assert picked.tobytes() == source[rows].tobytes()
    assert gathered.tobytes() == np.take_along_axis(source, positions, 0).tobytes()


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize("bad", [2**32 + 3, -1, 2**40])
def test_a_value_past_u32_is_an_index_error_not_a_wrap(backend, bad):
    """As if the caller wrote into the index array after the op checked it: 2**32 + 3 would wrap
    to 3 and -1 to 2**32 - 1 if narrowing wrapped."""
    source = np.arange(40, dtype=np.float32).reshape(10, 4)
    rows = np.array([1, 2, bad, 4], np.int64)
    with pytest.raises(IndexError):
        executor(backend).run(_program("IndexSelect", backend, source, rows), [source, rows])


def test_narrowing_saturates():
    got = narrowed_indices(np.array([0, 7, -1, 2**32, 2**32 - 1, -2**40], np.int64))
    assert got.dtype == np.uint32 and got.tolist() == [0, 7, 2**32 - 1, 2**32 - 1, 2**32 - 1, 2**32 - 1]
    assert narrowed_indices(np.array([3, -1], np.int8)).tolist() == [3, 2**32 - 1]
    u32 = np.arange(4, dtype=np.uint32)
    assert narrowed_indices(u32) is u32


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
def test_float_indices_and_other_data_dtypes_are_still_refused(backend):
    source = np.arange(40, dtype=np.float32).reshape(10, 4)
    rows = np.array([1, 2], np.uint32)
    program = _program("IndexSelect", backend, source, rows)
    with pytest.raises(TypeError):
        executor(backend).run(program, [source, rows.astype(np.float64)])
    with pytest.raises(TypeError):
        executor(backend).run(program, [source.astype(np.int64), rows])


@pytest.mark.parametrize("backend", [b.name.lower() for b in BACKENDS])
def test_large_int64_indices_through_the_lazy_api(monkeypatch, backend):
    """Indices over 1 MiB are a U32 snapshot taken when the op is built: a value written past the
    axis afterwards changes nothing (see tests/graph/test_indices_snapshot.py)."""
    monkeypatch.setenv("LAZYFUEL_BACKEND", backend)
    rng = np.random.default_rng(9)
    source = rng.standard_normal((3000, 8), dtype=np.float32)
    rows = rng.integers(0, 3000, 200_000)
    x = lf.from_array(source, chunks=(1000, 8))
    assert lf.index_select(x, 0, rows).compute().tobytes() == source[rows].tobytes()
    y = lf.index_select(x, 0, rows)
    want = source[rows]
    rows[123_456] = 2**32 + 5
    assert y.compute().tobytes() == want.tobytes()
