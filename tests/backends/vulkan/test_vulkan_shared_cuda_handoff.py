"""Results handed to CUDA with no copy, CUDA inputs read on the GPU (issue 18 item 2), on the real pool.

Here (lavapipe: host-visible memory) the hand-off is a CPU DLPack, chosen explicitly
(`shared.hand_off`), and the exportable buffers CUDA would import are exercised as far as Vulkan
goes: blocks reserved `shared`, their reuse with the buffer kept, fds handed out, the capsule
keeping its DeviceArray alive. The CUDA half runs where torch sees a CUDA GPU that is the Vulkan
pool's (the H200: `bash benchmarks/gpu_run.sh resident`), skipped with the reason elsewhere:
`torch.from_dlpack(y.compute(device=True))` and `cupy.asarray(r)` are the same device memory,
values bit-equal to numpy, no download in `lf.profile`; the memory outlives the DeviceArray while a
tensor holds it; `lf.from_array(cuda_tensor)` reads it device to device (no upload).
"""

from __future__ import annotations

import gc
import os
import weakref

import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel import dlpack
from lazyfuel.backends.vulkan import shared
from lazyfuel.backends.vulkan.device_array import DeviceArray
from lazyfuel.backends.vulkan.export import supported, vendor_id
from lazyfuel.backends.vulkan.memtypes import Mode
from lazyfuel.backends.vulkan.residency import ResidentBlock
from lazyfuel.backends.vulkan.shared import (
    CUDA,
    HOST,
    NONE,
    NVIDIA_VENDOR,
    buffers_of,
    choose,
    cuda_may_import,
    hand_off,
    may_import,
)
from lazyfuel.backends.vulkan.transfer import in_mode


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    return got.shape == want.shape and got.dtype == want.dtype and got.tobytes() == want.tobytes()


def _within_chunks(rng: np.random.Generator, n: int, chunk: int) -> np.ndarray:
    return np.concatenate([lo + rng.permutation(min(chunk, n - lo)) for lo in range(0, n, chunk)])


# -- the rule -------------------------------------------------------------------------------------
def test_the_hand_off_rule():
    assert choose(True, True, 0).kind == HOST  # host-visible memory: a CPU DLPack even beside CUDA
    assert choose(True, "no export", "no CUDA").kind == HOST
    found = choose(False, True, 3)
    assert found.kind == CUDA and found.cuda_device == 3
    assert choose(False, "gpu0 cannot export memory", 0) == (
        type(found)(NONE, None, "gpu0 cannot export memory"))
    why = choose(False, True, "CUDA is not usable here (no cuda-python)").why
    assert why.startswith("CUDA is not usable")


def test_the_compute_rule_needs_no_cuda():
    """`may_import`: what a compute asks to put its result in exportable memory, from the device and
    the environment only."""
    assert may_import(False, True, NVIDIA_VENDOR, True)
    assert not may_import(True, True, NVIDIA_VENDOR, True)  # host-visible: a CPU DLPack
    assert not may_import(False, False, NVIDIA_VENDOR, True)  # no export extension
    assert not may_import(False, True, 0x1002, True)  # an AMD GPU
    assert not may_import(False, True, 0x10005, True)  # Mesa's lavapipe in staged mode
    assert not may_import(False, True, NVIDIA_VENDOR, False)  # no cuda-python


@pytest.fixture
def no_cuda_lookup(monkeypatch):
    """CUDA's runtime may not be asked (`external._find_device` fails the test) until
    `allow()`, which lets it answer; the per-process answers start empty."""
    from lazyfuel.backends.vkfft import external

    asked: list[bytes] = []

    def refused(uuid: bytes) -> str:
        raise AssertionError(f"the CUDA runtime was asked for GPU {uuid.hex()} inside a compute")

    monkeypatch.setattr(external, "_uuid_devices", {})
    monkeypatch.setattr(external, "_find_device", refused)

    def allow() -> list[bytes]:
        def answered(uuid: bytes) -> str:
            asked.append(uuid)
            return f"none of the 0 CUDA device(s) is the GPU {uuid.hex()}"
        monkeypatch.setattr(external, "_find_device", answered)
        return asked
    return allow


def test_a_device_local_compute_never_asks_cuda(vulkan, pool, no_cuda_lookup):
    """Device-local memory (staged mode) that can be exported: the compute decides where its
    result goes without starting CUDA; the consumer's `hand_off` is what asks."""
    if not supported(pool):
        pytest.skip(f"{pool.label} has no VK_KHR_external_memory_fd")
    rng = np.random.default_rng()
    a = rng.standard_normal((96, 40)).astype(np.float32)
    idx = rng.integers(0, 96, 64)
    with in_mode(pool, Mode.STAGED):
        r = lf.from_array(a, chunks=(32, 40)).index_select(0, idx).compute(device=True)
        r1 = lf.from_array(a, chunks=(96, 40)).compute(device=True)  # one block, no assembly
        nvidia = vendor_id(pool.physical) == NVIDIA_VENDOR and shared._cuda_findable()
        assert cuda_may_import(pool) == nvidia  # lavapipe: no; the H200: yes, CUDA still unasked
        asked = no_cuda_lookup()
        assert r.hand_off.kind == NONE and len(asked) == 1  # asked now, by the consumer
        assert _same(np.asarray(r), a[idx]) and _same(np.asarray(r1), a)


def test_the_device_is_asked_of_itself_once_per_pool(vulkan, pool, no_cuda_lookup, monkeypatch):
    """Whether the device exports memory and its deviceUUID are asked once per pool, not on every
    hand-off: `torch.from_dlpack(r)` asks `hand_off` twice (`__dlpack_device__`, `__dlpack__`) on
    W4's ~3 ms path (issue 18 W4). Device-local (staged) memory, so the UUID is looked at too."""
    calls: list[str] = []
    real_supported, real_uuid = shared.supported, shared.device_uuid
    monkeypatch.setattr(shared, "supported", lambda p: calls.append("supported") or real_supported(p))
    monkeypatch.setattr(shared, "device_uuid", lambda ph: calls.append("uuid") or real_uuid(ph))
    no_cuda_lookup()
    with in_mode(pool, Mode.STAGED):
        found = [shared.hand_off(pool) for _ in range(3)] + [shared.cuda_may_import(pool) for _ in range(3)]
    assert found[0] == found[1] == found[2]
    assert calls.count("supported") <= 1 and calls.count("uuid") <= 1


def test_an_nvidia_device_puts_the_result_in_exportable_memory_unasked(vulkan, exporting,
                                                                       no_cuda_lookup, monkeypatch):
    """Where the rule says CUDA may import (the vendor and cuda-python made to say so here), the
    result lies in an exportable buffer, CUDA still unasked; a runtime that then finds no such GPU
    makes the hand-off `none`, and the values are the host copy's, bit-equal."""
    pool = exporting
    monkeypatch.setattr(shared, "vendor_id", lambda physical: NVIDIA_VENDOR)
    monkeypatch.setattr(shared, "_cuda_findable", lambda: True)
    rng = np.random.default_rng()
    for dtype, cols in ((np.float32, 1), (np.int64, 24), (np.uint8, 4096)):
        a = rng.integers(0, 100, (80, cols)).astype(dtype)
        idx = rng.integers(0, 80, 50)
        with in_mode(pool, Mode.STAGED), lf.config(backend="vulkan"):
            assert cuda_may_import(pool)
            r = lf.from_array(a, chunks=(30, cols)).index_select(0, idx).compute(device=True)
            assert r._block.shared_buffer is not None  # exportable, CUDA never asked
            assert _same(np.asarray(r), a[idx])
    asked = no_cuda_lookup()
    with in_mode(pool, Mode.STAGED):
        assert not r.host_visible
        assert r.hand_off.kind == NONE and "none of the 0 CUDA device(s)" in r.hand_off.why and asked
        assert _same(np.from_dlpack(r, device="cpu"), a[idx])  # the consumer's way: a host copy


def test_a_fresh_process_computes_without_starting_cuda():
    """In a process of its own (the H200's CUDA would start there), `compute(device=True)` leaves
    CUDA's runtime unasked; the DeviceArray's `hand_off` asks it."""
    import subprocess
    import sys

    code = ("import numpy as np, lazyfuel as lf\n"
            "from lazyfuel.backends.vkfft import external\n"
            "a = np.arange(4096, dtype=np.float32).reshape(256, 16)\n"
            "y = lf.from_array(a, chunks=(64, 16)).index_select(0, np.arange(255, -1, -1))\n"
            "r = y.compute(device=True)\n"
            "assert external._uuid_devices == {}, external._uuid_devices\n"
            "assert np.asarray(r).tobytes() == a[::-1].tobytes()\n"
            "print('ok', r.hand_off.kind)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("ok"), done.stderr[-2000:]


@pytest.fixture
def mapped(pool):
    if not pool.allocator.direct:
        pytest.skip(f"{pool.label}'s device memory is not host-visible here (no CPU DLPack)")
    return pool


def test_lavapipe_hands_off_a_cpu_dlpack(vulkan, mapped):
    assert hand_off(mapped).kind == HOST
    a = np.random.default_rng().standard_normal((64, 24)).astype(np.float32)
    r = lf.from_array(a, chunks=(16, 24)).compute(device=True)
    assert r.hand_off.kind == HOST and r.__dlpack_device__() == (dlpack.CPU, 0)
    assert not hasattr(r, "__cuda_array_interface__")
    view = np.from_dlpack(r)
    assert _same(view, a) and view.flags.writeable
    assert np.shares_memory(view, np.from_dlpack(r))  # both the mapped memory itself


def test_dlpack_arguments_are_checked(vulkan, mapped):
    """`__dlpack__(dl_device=, copy=)` as the array API standard says: in place unless copy=True,
    which exports a host copy flagged IS_COPIED; another device named in the refusal."""
    want = np.random.default_rng().integers(-2**31, 2**31, 6, dtype=np.int32)
    r = lf.from_array(want).compute(device=True)
    assert _same(np.from_dlpack(r, copy=False), want)  # in place
    assert np.shares_memory(np.from_dlpack(r, copy=False), np.from_dlpack(r, device="cpu"))
    copied = np.from_dlpack(r, copy=True)
    assert _same(copied, want) and not np.shares_memory(copied, np.from_dlpack(r))
    assert dlpack.flags(r.__dlpack__(copy=True, max_version=(1, 0))) == dlpack.IS_COPIED
    assert dlpack.flags(r.__dlpack__(max_version=(1, 0))) == 0
    with pytest.raises(BufferError, match=r"on DLPack device \(1, 0\): it exports to \(1, 0\), "
                                          r"not to \(2, 0\)"):
        r.__dlpack__(dl_device=(2, 0))
    with pytest.raises(TypeError, match=r"dl_device=...\) takes a \(device type, device number\) "
                                        r"pair, got 'cpu'"):
        r.__dlpack__(dl_device="cpu")
    with pytest.raises(TypeError, match="stream handle"):
        r.__dlpack__(stream="now")


def test_device_local_memory_goes_to_the_cpu_as_a_copy_only(vulkan, pool):
    """Unmapped device memory (staged mode: lavapipe's then is kDLVulkan, what a discrete GPU
    without CUDA has; the H200's kDLCUDA) is no CPU consumer's in place: numpy refuses it with our
    error or its own, a CPU request copies it unless copy=False forbids that."""
    want = np.random.default_rng().standard_normal((40, 12)).astype(np.float32)
    with in_mode(pool, Mode.STAGED):
        r = lf.from_array(want, chunks=(10, 12)).compute(device=True)
        here = r.__dlpack_device__()
        assert not r.host_visible and here[0] in (dlpack.VULKAN, dlpack.CUDA)
        refusal = "this DeviceArray lives in device-local memory" if here[0] == dlpack.VULKAN else (
            "Unsupported device in DLTensor")  # numpy's own (BufferError from numpy 2.5)
        live = dlpack.live()
        with pytest.raises((BufferError, RuntimeError), match=f"^{refusal}"):
            np.from_dlpack(r)
        with lf.profile() as p:
            got = np.from_dlpack(r, device="cpu")
        assert _same(got, want) and p.bytes_downloaded == want.nbytes and dlpack.live() == live + 1
        assert dlpack.flags(r.__dlpack__(dl_device=(dlpack.CPU, 0), max_version=(1, 0))) == dlpack.IS_COPIED
        with pytest.raises(BufferError, match=r"a CPU export needs a copy, and copy=False forbids one"):
            r.__dlpack__(dl_device=(dlpack.CPU, 0), copy=False)
        with pytest.raises(BufferError, match=r"on DLPack device \((7|2), \d+\): it exports to "
                                              r"(\(2, \d+\) in place or to )?\(1, 0\) as a host copy, "
                                              r"not to \(4, 0\)"):
            r.__dlpack__(dl_device=(4, 0))  # OpenCL
        del r, got
        gc.collect()
        assert dlpack.live() == live  # the copy's export went with its consumer


def test_a_thousand_hand_offs_then_the_memory_goes(vulkan, mapped):
    """Each capsule keeps the DeviceArray while its consumer holds it, and not longer: after 1000
    hand-offs (consumed, never consumed, copied) nothing is held and the DeviceArray is freed."""
    want = np.random.default_rng().standard_normal((16, 8))
    r = lf.from_array(want).compute(device=True)
    kept = weakref.ref(r)
    live = dlpack.live()
    held = []
    for k in range(1000):
        if k % 3 == 0:
            held.append(np.from_dlpack(r))
        elif k % 3 == 1:
            r.__dlpack__(max_version=(1, 0))  # never consumed
        else:  # a host copy, let go at once
            copied = np.from_dlpack(r, copy=True)
            assert k % 101 != 2 or _same(copied, want)
    del copied
    assert dlpack.live() == live + len(held)
    del r
    gc.collect()
    assert kept() is not None and all(_same(v, want) for v in held[::37])  # the views hold it
    held.clear()
    assert dlpack.live() == live and kept() is None


# -- the exportable buffers, as far as Vulkan goes --------------------------------------------------
def _shared_block(pool, a: np.ndarray) -> ResidentBlock:
    """A block in an exportable buffer holding `a`, still pinned (call `done()`)."""
    block = ResidentBlock.reserve(pool, a.shape, a.dtype, shared=True)
    with pool.batch() as batch:
        batch.upload(block.allocation, a.reshape(-1).view(np.uint8))
        batch.run()
    return block


@pytest.fixture
def exporting(pool):
    if not supported(pool):
        pytest.skip(f"{pool.label} has no VK_KHR_external_memory_fd")
    return pool


def test_a_shared_block_lies_in_an_exportable_buffer_reused_when_freed(vulkan, exporting):
    pool, buffers = exporting, buffers_of(exporting)
    buffers.trim()
    a = np.random.default_rng().standard_normal((32, 48)).astype(np.float32)
    block = _shared_block(pool, a)
    assert block.shared_buffer is not None and block.shared_buffer.memory.allocation is block.allocation
    block.done()
    buffer = block.shared_buffer
    fd = buffer.memory.fd()  # exportable: an fd CUDA's import would take over
    os.close(fd)
    assert _same(np.asarray(block), a)
    made = buffers.made
    del block
    gc.collect()
    assert buffers.cached_bytes >= a.nbytes  # kept, with the import it would have
    again = ResidentBlock.reserve(pool, a.shape, a.dtype, shared=True)
    assert again.shared_buffer is buffer and buffers.made == made  # the same buffer, no new memory
    again.done()
    del again
    gc.collect()
    assert buffers.trim() >= a.nbytes and buffers.cached_bytes == 0


def test_a_shared_block_that_spills_comes_back_in_ordinary_memory(vulkan, exporting):
    pool = exporting
    a = np.random.default_rng().integers(0, 2**31, (16, 40), dtype=np.int32)
    block = _shared_block(pool, a)
    block.done()
    store = block._store
    store._spill(block._slot)  # the least recently used block under a full budget
    assert block.spilled and block.shared_buffer is None
    assert _same(np.asarray(block), a)
    with pool.batch() as batch:
        block.bind(batch)  # back on the device
    assert not block.spilled and block.shared_buffer is None and _same(np.asarray(block), a)


def test_the_capsule_keeps_its_device_array_alive(vulkan, exporting, mapped):
    """A DeviceArray over a shared block: the consumer's array outlives the DeviceArray, and the
    buffer goes back to the pool only once the last consumer lets go (numpy's, where the memory is
    host-visible; torch's on CUDA: `test_torch_reads_the_result_in_place`)."""
    pool, buffers = exporting, buffers_of(exporting)
    buffers.trim()
    a = np.random.default_rng().standard_normal((8, 64)).astype(np.float64)
    block = _shared_block(pool, a)
    r = DeviceArray(block)
    block.done()
    del block
    live = dlpack.live()
    view = np.from_dlpack(r)
    assert dlpack.live() == live + 1
    del r
    gc.collect()
    assert buffers.cached_bytes == 0 and _same(view, a)  # still pinned by the view
    view[0, 0] = 7.0  # writeable, and still the device memory
    del view
    gc.collect()
    assert dlpack.live() == live and buffers.cached_bytes >= a.nbytes


def test_an_unconsumed_capsule_lets_go(vulkan, pool):
    r = lf.from_array(np.ones((4, 4), np.float32)).compute(device=True)
    live = dlpack.live()
    capsule = r.__dlpack__()
    assert dlpack.live() == live + 1
    del capsule
    assert dlpack.live() == live


# -- CUDA (the H200) ------------------------------------------------------------------------------
def _cuda_torch():
    torch = pytest.importorskip("torch", reason="the CUDA hand-off needs torch here")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA GPU")
    return torch


@pytest.fixture
def cuda_pool(vulkan, pool):
    torch = _cuda_torch()
    found = hand_off(pool)
    if found.kind != CUDA:
        pytest.skip(f"the Vulkan pool does not hand off to CUDA here: {found.why}")
    return torch, pool, found.cuda_device


def _chain(rng: np.random.Generator, rows: int, cols: int, chunk: int):
    a = rng.standard_normal((rows, cols)).astype(np.float32)
    idx = _within_chunks(rng, rows, chunk)
    mask = rng.random((rows, 1)) < 0.3
    return a, idx, mask, np.where(mask, np.float32(-1), a[idx])


def test_torch_reads_the_result_in_place(cuda_pool):
    torch, pool, device = cuda_pool
    a, idx, mask, want = _chain(np.random.default_rng(), 4096, 256, 4096)  # one block: no assembly
    y = lf.from_array(a, chunks=(4096, 256)).index_select(0, idx).masked_fill(mask, -1)
    with lf.profile() as p:
        r = y.compute(device=True)
        t = torch.from_dlpack(r)
    assert p.bytes_downloaded == 0
    assert r.__dlpack_device__() == (dlpack.CUDA, device) and t.device == torch.device("cuda", device)
    assert t.data_ptr() == r.__cuda_array_interface__["data"][0]  # the same memory
    assert _same(t.cpu().numpy(), want)
    buffers = buffers_of(pool)
    del r, y
    gc.collect()
    for _ in range(3):  # new results take memory; the tensor's stays valid
        lf.from_array(a, chunks=(1024, 256)).compute(device=True)
    assert _same(t.cpu().numpy(), want)
    t.add_(1)  # CUDA writes it
    assert _same(t.cpu().numpy(), want + np.float32(1))
    cached = buffers.cached_bytes
    del t
    gc.collect()
    assert buffers.cached_bytes > cached or buffers.cached_bytes >= want.nbytes


def test_numpy_refuses_a_cuda_result_with_its_own_error(cuda_pool):
    """issue 18, W4: numpy drops the CUDA capsule it refuses with its error set; that error (not a
    SystemError) reaches the user and the capsule lets go. A CPU request copies."""
    _, _, device = cuda_pool
    a, idx, mask, want = _chain(np.random.default_rng(), 512, 64, 128)
    r = lf.from_array(a, chunks=(128, 64)).index_select(0, idx).masked_fill(mask, -1).compute(device=True)
    assert r.__dlpack_device__() == (dlpack.CUDA, device)
    live = dlpack.live()
    with pytest.raises((BufferError, RuntimeError), match=r"^Unsupported device in DLTensor\.$"):
        np.from_dlpack(r)
    assert dlpack.live() == live
    assert _same(np.from_dlpack(r, device="cpu"), want)  # a host copy
    with pytest.raises(BufferError, match=r"a CPU export needs a copy, and copy=False forbids one"):
        r.__dlpack__(dl_device=(dlpack.CPU, 0), copy=False)
    with pytest.raises(BufferError, match=r"^a DeviceArray copies to host memory only"):
        r.__dlpack__(copy=True)
    assert dlpack.live() == live


def test_an_assembled_result_and_cupy(cuda_pool):
    torch, _, _ = cuda_pool
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed here")
    a, idx, mask, want = _chain(np.random.default_rng(), 3000, 128, 500)  # 6 blocks, assembled
    y = lf.from_array(a, chunks=(500, 128)).index_select(0, idx).masked_fill(mask, -1)
    r = y.compute(device=True)
    c = cupy.asarray(r)
    assert c.data.ptr == r.__cuda_array_interface__["data"][0] and c.shape == want.shape
    assert _same(cupy.asnumpy(c), want)
    assert _same(torch.from_dlpack(r).cpu().numpy(), want)
    assert _same(np.asarray(r), want)  # a host copy as ever


def test_from_array_of_a_cuda_tensor_is_read_on_the_gpu(cuda_pool):
    torch, _, device = cuda_pool
    rng = np.random.default_rng()
    host = rng.standard_normal((2048, 96)).astype(np.float32)
    t = torch.from_numpy(host).to(f"cuda:{device}")
    with lf.profile() as p:
        x = lf.from_array(t, chunks=(512, 48))  # copied now, device to device
        t.zero_()  # the Array holds a copy
        idx = _within_chunks(rng, 2048, 512)
        got = x.index_select(0, idx).compute(device=True)
    assert p.bytes_uploaded <= idx.nbytes  # the indices only: no tensor upload
    assert _same(torch.from_dlpack(got).cpu().numpy(), host[idx])
    assert _same(x.compute(), host)


def test_from_array_refuses_a_strided_cuda_tensor(cuda_pool):
    torch, _, device = cuda_pool
    t = torch.zeros((64, 32), device=f"cuda:{device}").t()
    with pytest.raises(TypeError, match=r"C-contiguous.*contiguous"):
        lf.from_array(t)


# -- what a DeviceArray's hand-off finds once -------------------------------------------------------
def _expected_pair(r: DeviceArray) -> tuple[int, int]:
    """The DLPack device of `r` worked out afresh, by the rule (not by `r`'s cached fields)."""
    if r._block.allocation.host is not None:
        return (dlpack.CPU, 0)
    found = hand_off(r.pool)
    if found.kind == CUDA and r._block.shared_buffer is not None:
        return (dlpack.CUDA, found.cuda_device)
    return (dlpack.VULKAN, r.pool.info.index)


@pytest.mark.parametrize("mode", [None, Mode.STAGED], ids=["mapped", "staged"])
def test_the_hand_off_is_found_once_and_is_what_a_fresh_look_finds(vulkan, pool, no_cuda_lookup,
                                                                  monkeypatch, mode):
    """`hand_off`, `__dlpack_device__` and the address are worked out on the first ask and kept:
    equal to the rule asked afresh, the pool's `hand_off` asked once however often a consumer asks,
    never by the compute; a host-visible array's capsules are over the mapped memory, bit-equal."""
    from lazyfuel.backends.vulkan import device_array

    no_cuda_lookup()
    asked: list[object] = []
    monkeypatch.setattr(device_array, "hand_off", lambda p: asked.append(p) or hand_off(p))
    want = np.random.default_rng().standard_normal((48, 20)).astype(np.float32)
    with in_mode(pool, mode) if mode else lf.config():
        r = lf.from_array(want, chunks=(16, 20)).compute(device=True)
        assert r._hand_off is None and r._device_pair is None and not asked  # the compute asks nothing
        pairs = [r.__dlpack_device__() for _ in range(3)]
        found = [r.hand_off for _ in range(3)]
        assert pairs[0] == pairs[1] == pairs[2] == _expected_pair(r)
        assert found[0] is found[1] is found[2] and found[0].kind == (HOST if r.host_visible else NONE)
        assert len(asked) == (0 if r.host_visible else 1)
        if r.host_visible:
            views = [np.from_dlpack(r) for _ in range(3)]
            assert r._address == r._block.allocation.host.ctypes.data
            assert all(_same(v, want) and np.shares_memory(v, views[0]) for v in views)
        else:
            with pytest.raises(BufferError, match="which no DLPack consumer reads in place"):
                r.__dlpack__()
            assert r._address is None


def test_a_cuda_hand_off_imports_once_and_its_capsules_keep_the_array(vulkan, exporting, no_cuda_lookup,
                                                                      monkeypatch):
    """The H200's path as far as lavapipe goes: the result in an exportable buffer, CUDA made to
    say the pool's GPU is device 0 and CUDA's import faked (an address of our own, counted): every
    capsule and `__cuda_array_interface__` are on (kDLCUDA, 0) at that address, imported once; each
    capsule keeps the DeviceArray alive until it dies, and `live()` comes back to where it was."""
    from lazyfuel.backends.vkfft import external

    pool = exporting
    monkeypatch.setattr(shared, "vendor_id", lambda physical: NVIDIA_VENDOR)
    monkeypatch.setattr(shared, "_cuda_findable", lambda: True)
    no_cuda_lookup()
    monkeypatch.setattr(external, "_find_device", lambda uuid: 0)
    imports: list[int] = []

    def imported(buffer, device: int) -> int:
        imports.append(device)
        return int(buffer.memory.allocation.address) + 4096  # anything but the host's or 0

    monkeypatch.setattr(shared.SharedBuffer, "cuda_pointer", imported)
    want = np.random.default_rng().standard_normal((40, 12)).astype(np.float32)
    live = dlpack.live()
    with in_mode(pool, Mode.STAGED), lf.config(backend="vulkan"):
        r = lf.from_array(want, chunks=(10, 12)).compute(device=True)
        assert r._block.shared_buffer is not None and not imports
        assert r.__dlpack_device__() == (dlpack.CUDA, 0) == _expected_pair(r) and r.hand_off.kind == CUDA
        address = int(r._block.shared_buffer.memory.allocation.address) + 4096
        capsules = [r.__dlpack__(stream=7), r.__dlpack__(stream=None, max_version=(1, 0))]
        assert r.__cuda_array_interface__["data"] == (address, False) and imports == [0]
        for made in capsules:
            pointer, device, shape, strides, dtype = dlpack.read(made)
            assert (pointer, device, shape, strides, dtype) == (address, (dlpack.CUDA, 0), want.shape,
                                                               (48, 4), want.dtype)
        del made
        assert dlpack.flags(capsules[1]) == 0 and dlpack.live() == live + 2
        kept = weakref.ref(r)
        assert _same(np.asarray(r), want)
        del r
        gc.collect()
        assert kept() is not None  # the capsules hold it
        capsules.pop()
        gc.collect()
        assert kept() is not None and dlpack.live() == live + 1
        capsules.clear()
        assert kept() is None and dlpack.live() == live


@pytest.mark.parametrize("mode", [None, Mode.STAGED], ids=["mapped", "staged"])
def test_the_pools_hand_off_is_one_object_equal_to_the_rule(vulkan, pool, no_cuda_lookup, mode):
    """`hand_off(pool)` makes each answer once (the same frozen HandOff again), equal to `choose`
    asked afresh with what the device and CUDA say; CUDA asked once, as before."""
    asked = no_cuda_lookup()
    with in_mode(pool, mode) if mode else lf.config():
        found = [hand_off(pool) for _ in range(3)]
        assert found[0] is found[1] is found[2]
        exportable = supported(pool) or f"{pool.label} cannot export memory (no {shared.EXTENSION})"
        cuda = "not asked"
        if not pool.allocator.direct and exportable is True:
            cuda = f"none of the 0 CUDA device(s) is the GPU {shared.device_uuid(pool.physical).hex()}"
        assert found[0] == choose(pool.allocator.direct, exportable, cuda)
        assert len(asked) == (1 if cuda != "not asked" else 0)
