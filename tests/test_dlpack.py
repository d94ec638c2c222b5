"""`lazyfuel.dlpack`: capsules built with ctypes, read by numpy (legacy and versioned), and read back."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from lazyfuel import dlpack


class Producer:
    """A host array exported through `dlpack.capsule` (what DeviceArray does for mapped memory)."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    def __dlpack_device__(self):
        return (dlpack.CPU, 0)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        return dlpack.capsule(self.a.ctypes.data, self.a.shape, self.a.dtype, (dlpack.CPU, 0), self,
                              max_version=max_version)


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
