"""`lazyfuel.backends.vulkan.device_array`: a result left in Vulkan memory (`compute(device=True)`)
as one C-order DeviceArray, assembled from its blocks by device copies of contiguous runs; read
in place through DLPack where the memory is host-visible (lavapipe), copied by `to_host`, bit for
bit as numpy on fresh random data; what it cannot do refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel import dlpack
from lazyfuel.backends.vulkan.device_array import DeviceArray, _runs, assemble
from lazyfuel.backends.vulkan.residency import ResidentBlock
from lazyfuel.backends.vulkan.shared import cuda_may_import

RNG = np.random.default_rng()


def place(block: tuple[int, ...], origin: tuple[int, ...], shape: tuple[int, ...]) -> np.ndarray:
    """Bytes of a C-order array of `shape` with a block of `block` copied in at `origin` by `_runs`."""
    item = 4
    src = RNG.integers(1, 2**31, block, dtype=np.int32) if all(block) else np.zeros(block, np.int32)
    out = np.zeros(shape, np.int32)
    flat_out, flat_src = out.reshape(-1).view(np.uint8), src.reshape(-1).view(np.uint8)
    for s, d, n in _runs(block, origin, shape, item):
        flat_out[d:d + n] = flat_src[s:s + n]
    want = np.zeros(shape, np.int32)
    want[tuple(slice(o, o + b) for o, b in zip(origin, block))] = src
    assert out.tobytes() == want.tobytes(), (block, origin, shape)
    return out


@pytest.mark.parametrize(("block", "origin", "shape"), [
    ((2, 3), (4, 0), (6, 3)),          # whole rows: one run
    ((2, 2), (1, 1), (4, 5)),          # a tile: one run per row
    ((2, 3, 4), (1, 0, 0), (3, 3, 4)),  # whole trailing planes
    ((1, 2, 2), (0, 1, 2), (2, 3, 4)),
    ((0, 3), (0, 0), (2, 3)),          # empty: nothing
])
def test_runs_place_a_block_where_it_belongs(block, origin, shape):
    place(block, origin, shape)
    if all(block) and block[1:] == shape[1:]:
        assert len(_runs(block, origin, shape, 4)) == 1


def test_a_0d_block_is_one_element():
    assert _runs((), (), (), 8) == [(0, 0, 8)]


def test_a_chunked_result_is_one_device_array_read_in_place(vulkan):
    a = RNG.standard_normal((9, 6)).astype(np.float32)
    idx = RNG.integers(0, 9, 7)
    r = lf.from_array(a, chunks=(4, 3)).index_select(0, idx).compute(device=True)
    assert isinstance(r, DeviceArray) and (r.shape, r.dtype) == ((7, 6), np.float32)
    assert r.to_host().tobytes() == a[idx].tobytes() == np.asarray(r).tobytes()
    assert np.asarray(r, dtype=np.float64).dtype == np.float64
    assert repr(r) == f"lazyfuel.DeviceArray(shape=(7, 6), dtype=float32, device={r.device!r})"
    if r.host_visible:  # lavapipe: the mapped memory itself
        assert r.__dlpack_device__() == (dlpack.CPU, 0)
        view = np.from_dlpack(r)
        assert view.tobytes() == a[idx].tobytes() and np.shares_memory(view, np.from_dlpack(r))


def test_a_result_of_one_block_is_that_block(vulkan):
    a = RNG.integers(0, 100, (5, 4)).astype(np.int32)
    r = lf.from_array(a, chunks=(5, 4)).masked_fill(a > 50, -1).compute(device=True)
    assert r.to_host().tobytes() == np.where(a > 50, np.int32(-1), a).tobytes()


def test_what_it_cannot_do_is_refused_by_name(vulkan):
    r = lf.from_array(np.ones((2, 2), np.float32), chunks=1).contiguous().compute(device=True)
    assert not hasattr(r, "cuda")  # torch.from_dlpack(r) / cupy.asarray(r) hand it to CUDA
    if r.host_visible:  # lavapipe: memory CUDA does not share
        with pytest.raises(AttributeError, match=r"^this DeviceArray is not in memory CUDA shares"):
            r.__cuda_array_interface__  # noqa: B018
    with pytest.raises(ValueError, match=r"^assemble\(\) needs at least one resident block$"):
        assemble([np.zeros((2, 2), np.float32)], ((2,), (2,)), np.float32)


@pytest.fixture
def shader_copies(pool):
    """Device copies from 16 bytes by the copy shader (the H200's rule, `priors.SHADER_COPY_MIN`,
    run on lavapipe), every allocation poisoned."""
    saved = pool.shader_copy_min
    pool.shader_copy_min = 16
    yield pool
    pool.shader_copy_min = saved


def _blocks_of(a: np.ndarray, chunks: tuple[tuple[int, ...], ...]) -> list[np.ndarray]:
    """The blocks of `a` over `chunks`, row-major."""
    starts = [np.concatenate(([0], np.cumsum(c))) for c in chunks]
    grid = np.ndindex(*(len(c) for c in chunks))
    return [a[tuple(slice(s[i], s[i + 1]) for s, i in zip(starts, at))] for at in grid]


@pytest.mark.parametrize(("dtype", "shape", "chunks"), [
    (np.float32, (4096, 64), ((1024, 1024, 1024, 1024), (64,))),   # W2's form: whole rows
    (np.float64, (3000, 8), ((1700, 1300), (8,))),                  # uneven blocks
    (np.uint8, (20000,), ((8192, 8192, 3616),)),                    # rank 1, bytes
    (np.int16, (64, 32, 16), ((40, 24), (16, 16), (16,))),          # rank 3: runs of planes' rows
    (np.complex128, (129, 33), ((64, 65), (33,))),                  # runs off storage alignment
])
def test_assembly_copies_large_runs_with_the_copy_shader(shader_copies, dtype, shape, chunks):
    pool = shader_copies
    a = RNG.integers(0, 256, (int(np.prod(shape)) * np.dtype(dtype).itemsize,), dtype=np.uint8)
    a = a.view(dtype).reshape(shape)
    blocks = [ResidentBlock.upload(pool, np.ascontiguousarray(b)) for b in _blocks_of(a, chunks)]
    before = pool.dispatches
    r = assemble(blocks, chunks, dtype, pool)
    assert r.to_host().tobytes() == a.tobytes()
    aligned = [s for b in blocks for s, d, n in _runs(b.shape, (0,) * a.ndim, shape, a.itemsize)
               if n % 16 == 0]
    assert pool.dispatches > before or not aligned  # the shader ran where a run could bind


def test_host_and_other_blocks_still_go_into_place(shader_copies):
    pool = shader_copies
    a = RNG.standard_normal((600, 12)).astype(np.float32)
    chunks = ((256, 200, 144), (12,))
    parts = _blocks_of(a, chunks)
    blocks = [ResidentBlock.upload(pool, parts[0]), parts[1].copy(), ResidentBlock.upload(pool, parts[2])]
    assert assemble(blocks, chunks, np.float32, pool).to_host().tobytes() == a.tobytes()


def test_a_block_of_another_pool_comes_into_place(shader_copies):
    from lazyfuel.backends.vulkan import get_pool

    pool = shader_copies
    other = get_pool(pool.info.index, replica=1)  # its own VkDevice
    other.allocator.poison = pool.allocator.poison
    a = RNG.integers(-2**62, 2**62, (900, 6), dtype=np.int64)
    chunks = ((512, 388), (6,))
    parts = _blocks_of(a, chunks)
    blocks = [ResidentBlock.upload(other, parts[0]), ResidentBlock.upload(pool, parts[1])]
    assert assemble(blocks, chunks, np.int64, pool).to_host().tobytes() == a.tobytes()


def test_one_block_is_still_that_block(shader_copies):
    """No copy where the block already is what the result needs (on a GPU CUDA shares, an
    exportable block: a plain one is copied into an exportable allocation, by the shader)."""
    pool = shader_copies
    a = RNG.standard_normal((64, 4)).astype(np.float32)
    block = ResidentBlock.reserve(pool, a.shape, a.dtype, shared=cuda_may_import(pool))
    with pool.batch() as batch:
        batch.upload(block.allocation, a.reshape(-1).view(np.uint8))
        batch.run()
    block.done()
    before = pool.dispatches
    r = assemble([block], ((64,), (4,)), np.float32, pool)
    assert pool.dispatches == before and r.to_host().tobytes() == a.tobytes()
    assert r._block is block


def test_a_chunked_compute_assembles_with_the_shader_bit_for_bit(vulkan, shader_copies):
    a = RNG.standard_normal((5000, 32)).astype(np.float32)
    idx = RNG.integers(0, 5000, 3001)
    y = lf.from_array(a, chunks=(1250, 32)).index_select(0, lf.from_array(idx, chunks=1000))
    r = y.compute(device=True)
    assert isinstance(r, DeviceArray) and r.to_host().tobytes() == a[idx].tobytes()
