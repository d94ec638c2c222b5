"""Many threads on one pool: every result exact, no deadlock."""

from __future__ import annotations

import threading

import numpy as np
from vulkan_helpers import ProgramBuilder, random_array, raw, run_one, same_bits

from lazyfuel.dtypes import DType

THREADS = 8
TASKS = 200
DTYPES = [DType.U8, DType.F16, DType.BF16, DType.F32, DType.F64, DType.U32]


def task(executor, rng: np.random.Generator) -> None:
    dtype = DTYPES[int(rng.integers(len(DTYPES)))]
    shape = (int(rng.integers(1, 9)), int(rng.integers(1, 9)))
    x = random_array(rng, dtype, shape)
    kind = int(rng.integers(3))
    if kind == 0:
        view = x[::-1]
        idx = rng.integers(0, shape[0], 5).astype(np.uint32)
        b = ProgramBuilder(view, idx)
        got = run_one(executor, b, b.index_select(b.input(0), shape, dtype, 0, 1, 5))
        same_bits(got, np.take(raw(view), idx, axis=0).view(x.dtype))
    elif kind == 1:
        idx = rng.integers(0, shape[1], shape).astype(np.uint32)
        b = ProgramBuilder(x, idx)
        got = run_one(executor, b, b.gather(0, shape, dtype, 1, 1, shape))
        same_bits(got, np.take_along_axis(raw(x), idx.astype(np.intp), axis=1).view(x.dtype))
    else:
        mask = rng.integers(0, 2, shape).astype(bool)
        fill = random_array(rng, dtype, ()).tobytes()
        b = ProgramBuilder(x.T, mask.T)
        got = run_one(executor, b, b.masked_fill(b.input(0), shape[::-1], dtype, b.input(1), fill))
        value = np.frombuffer(fill, f"V{dtype.itemsize}")[0]
        same_bits(got, np.where(mask.T, value, raw(x.T)).view(x.dtype))


def test_threads_share_one_pool(executor, pool):
    errors: list[BaseException] = []
    done = [0] * THREADS

    def worker(k: int) -> None:
        rng = np.random.default_rng(1000 + k)
        try:
            for _ in range(TASKS):
                task(executor, rng)
                done[k] += 1
        except BaseException as exc:  # reported below, with the thread that failed
            errors.append(exc)

    submits = pool.submits
    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), f"deadlock: tasks done per thread {done}"
    assert not errors, f"{len(errors)} tasks failed; first: {errors[0]!r}"
    assert done == [TASKS] * THREADS
    assert pool.submits - submits == THREADS * TASKS
