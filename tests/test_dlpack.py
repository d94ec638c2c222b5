"""`lazyfuel.dlpack`: capsules (numpy's exporter, our device written in) read by numpy (legacy and
versioned) and read back; no code of ours runs as one is freed, so a consumer that refuses one
raises its own error; nothing leaks over a thousand hand-offs."""

from __future__ import annotations

import gc
import threading
import weakref

import numpy as np
import pytest

from lazyfuel import dlpack


class Producer:
    """A host array exported through `dlpack.capsule` (what DeviceArray does for mapped memory),
    claiming to live on `device` (a CUDA one: what DeviceArray hands to CUDA); `legacy`: a producer
    that ignores `max_version`."""

    def __init__(self, a: np.ndarray, device: tuple[int, int] = (dlpack.CPU, 0),
                 legacy: bool = False) -> None:
        self.a, self.device, self.legacy = a, device, legacy

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        return dlpack.capsule(self.a.ctypes.data, self.a.shape, self.a.dtype, self.device, self,
                              max_version=None if self.legacy else max_version)


@pytest.mark.parametrize("dtype", ["f4", "f8", "i1", "i8", "u2", "u4", "c8", "?"])
def test_numpy_reads_the_memory_itself(dtype):
    rng = np.random.default_rng()
    a = (rng.standard_normal((5, 7)) * 100).astype(dtype)
    live = dlpack.live()
    got = np.from_dlpack(Producer(a))
    assert got.dtype == a.dtype and got.shape == a.shape and np.shares_memory(got, a)
    assert got.tobytes() == a.tobytes() and got.flags.writeable  # numpy asked for the versioned capsule
    assert dlpack.live() == live + 1
    del got
    gc.collect()
    assert dlpack.live() == live


def test_the_producer_lives_while_the_consumer_does():
    a = np.arange(10, dtype=np.float32)
    p = Producer(a)
    got = np.from_dlpack(p)
    del p, a
    gc.collect()
    assert got.tolist() == list(range(10))


@pytest.mark.parametrize("max_version", [None, (1, 0), (1, 3)])
def test_read_gives_the_tensor_back(max_version):
    a = np.zeros((3, 0, 4), np.int16)
    b = np.full((2, 3), 5, np.uint8)
    for x in (a, b, np.array(2.5)):
        capsule = Producer(x).__dlpack__(max_version=max_version)
        pointer, device, shape, strides, dtype = dlpack.read(capsule)
        assert (device, shape, dtype) == ((dlpack.CPU, 0), x.shape, x.dtype)
        assert strides == np.empty_like(x, order="C").strides or not x.size  # numpy zeroes an empty one's
        assert pointer == x.ctypes.data or not x.size
        del capsule
    gc.collect()
    assert dlpack.live() == 0


def test_bad_dtypes_and_used_capsules_are_refused():
    with pytest.raises(BufferError, match="native byte order, not >i4"):
        dlpack.dtype_of(np.dtype(">i4"))
    with pytest.raises(BufferError, match="not datetime64"):
        dlpack.dtype_of(np.dtype("M8[s]"))
    with pytest.raises(BufferError, match="lanes"):
        dlpack.numpy_dtype(2, 32, 4)
    capsule = np.arange(3).__dlpack__()  # numpy's own (a used capsule after this read is refused too)
    _, device, shape, _, dtype = dlpack.read(capsule)
    assert device == (dlpack.CPU, 0) and shape == (3,) and dtype == np.int64


@pytest.mark.parametrize("legacy", [False, True], ids=["versioned", "legacy"])
def test_a_refused_cuda_capsule_raises_numpys_own_error(legacy):
    """numpy drops a capsule it refuses with its error set: the capsule dies then, and must run no
    Python (a ctypes destructor there turned numpy's error into a SystemError and leaked the tensor)."""
    a = np.random.default_rng().standard_normal(16).astype(np.float32)
    live = dlpack.live()
    producer = Producer(a, (dlpack.CUDA, 0), legacy)
    kept = weakref.ref(producer)
    with pytest.raises((BufferError, RuntimeError), match=r"^Unsupported device in DLTensor\.$"):
        np.from_dlpack(producer)
    del producer
    gc.collect()
    assert dlpack.live() == live and kept() is None


def test_a_thousand_hand_offs_leak_nothing():
    rng = np.random.default_rng()
    a = rng.integers(-2**62, 2**62, (33, 5), dtype=np.int64)
    live = dlpack.live()
    for k in range(1000):
        producer = Producer(a, legacy=k % 2 == 1)
        kind = k % 4
        if kind < 2:  # consumed by numpy and let go
            got = np.from_dlpack(producer)
            if k % 97 == 0:
                assert got.tobytes() == a.tobytes()
            del got
        elif kind == 2:  # never consumed
            producer.__dlpack__(max_version=(1, 0))
        else:  # refused by numpy
            producer.device = (dlpack.CUDA, 1)
            with pytest.raises((BufferError, RuntimeError), match="Unsupported device"):
                np.from_dlpack(producer)
    del producer
    assert dlpack.live() == live  # no reference cycle holds any: freed as the last reference went


def test_the_memory_is_released_when_the_last_consumer_lets_go_on_any_thread():
    a = np.random.default_rng().standard_normal((4, 6))
    producer = Producer(a)
    kept = weakref.ref(producer)
    views = [np.from_dlpack(producer), np.from_dlpack(producer)]
    del producer
    assert kept() is not None and views[1].tobytes() == a.tobytes()
    views.pop()
    assert kept() is not None  # the other consumer still holds it
    done = threading.Thread(target=views.clear)  # the last one lets go on another thread
    done.start()
    done.join()
    assert kept() is None


def test_a_versioned_capsule_says_writeable_or_copied():
    a = np.arange(12, dtype=np.uint16)
    plain = dlpack.capsule(a.ctypes.data, a.shape, a.dtype, (dlpack.CPU, 0), a, max_version=(1, 0))
    copied = dlpack.capsule(a.ctypes.data, a.shape, a.dtype, (dlpack.CPU, 0), a, max_version=(1, 2),
                            copied=True)
    assert dlpack.flags(plain) == 0 and dlpack.flags(copied) == dlpack.IS_COPIED
    with pytest.raises(BufferError, match=r"needs the memory's address, got NULL"):
        dlpack.capsule(0, (2,), np.float32, (dlpack.CUDA, 0), None)


@pytest.mark.parametrize("legacy", [False, True], ids=["versioned", "legacy"])
def test_torch_on_the_cpu_shares_the_memory_and_lets_go(legacy):
    torch = pytest.importorskip("torch", reason="torch is not installed here")
    a = np.random.default_rng().standard_normal((6, 5)).astype(np.float32)
    live = dlpack.live()
    producer = Producer(a, legacy=legacy)
    kept = weakref.ref(producer)
    t = torch.from_dlpack(producer)
    del producer
    gc.collect()
    assert t.data_ptr() == a.ctypes.data and t.numpy().tobytes() == a.tobytes() and kept() is not None
    t[0, 0] = 5.0  # writeable, and the memory itself
    assert a[0, 0] == 5.0
    del t
    gc.collect()
    assert kept() is None and dlpack.live() == live


@pytest.mark.parametrize("max_version", [None, (1, 0), (1, 3)], ids=["legacy", "v1.0", "v1.3"])
@pytest.mark.parametrize("device", [(dlpack.CPU, 0), (dlpack.CUDA, 0), (dlpack.CUDA, 3), (dlpack.VULKAN, 1)])
@pytest.mark.parametrize("copied", [False, True], ids=["in-place", "copied"])
def test_every_field_of_a_capsule_is_what_dlpack_h_says(max_version, device, copied):
    """`capsule` writes into numpy's capsule only what differs from numpy's CPU export (the device,
    an empty array's NULL data, the flags): every field read back raw is ours, and the bytes are
    the memory's own."""
    a = np.random.default_rng().standard_normal((7, 3)).astype(np.float32)
    for x, pointer in ((a, a.ctypes.data), (np.empty((0, 4), np.int32), 0)):
        made = dlpack.capsule(pointer, x.shape, x.dtype, device, x, max_version=max_version, copied=copied)
        name, managed = dlpack._managed(made)
        versioned = max_version is not None
        assert name == (b"dltensor_versioned" if versioned else b"dltensor")
        t = managed.dl_tensor
        assert (t.data or 0) == pointer and t.byte_offset == 0 and t.ndim == x.ndim
        assert (t.device.device_type, t.device.device_id) == device
        assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (2 if x is a else 0, 32, 1)
        assert tuple(t.shape[k] for k in range(t.ndim)) == x.shape
        assert dlpack.flags(made) == (dlpack.IS_COPIED if copied and versioned else 0)
        if versioned:
            assert (managed.version.major, managed.version.minor) == dlpack.VERSION
        if device == (dlpack.CPU, 0) and x.size:
            got = np.from_dlpack(_Held(made))
            assert np.shares_memory(got, x) and got.tobytes() == x.tobytes()
            del got
        del made
    gc.collect()
    assert dlpack.live() == 0


class _Held:
    """A producer handing out one capsule made already (what numpy's `from_dlpack` takes)."""

    def __init__(self, made) -> None:
        self.made = made

    def __dlpack_device__(self):
        return (dlpack.CPU, 0)

    def __dlpack__(self, **kwargs):
        return self.made
