"""The CPU provider's numpy.fft (`backends.cpu.fft`): the reference functions in double precision as
the promised dtype, and the step functions in the input's own precision, any layout, both against
numpy.fft on fresh random data."""

from __future__ import annotations

import numpy as np
import pytest

from lazyfuel.backends.cpu import fft as cpu_fft


def _data(dtype, shape=(4, 12)) -> np.ndarray:
    rng = np.random.default_rng(41)
    x = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if np.dtype(dtype).kind == "c" else 0)
    return x.astype(dtype)


@pytest.mark.parametrize(("name", "dtype", "out"), [
    ("fft", np.float32, np.complex64), ("ifft", np.complex128, np.complex128),
    ("rfft", np.float64, np.complex128), ("irfft", np.complex64, np.float32)])
def test_the_references_are_numpys_in_double_precision(name, dtype, out) -> None:
    x = _data(dtype)[:, ::-1]  # a strided view
    got = getattr(cpu_fft, name)(x, n=10, axis=-1, norm="ortho")
    double = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
    want = getattr(np.fft, name)(double, n=10, axis=-1, norm="ortho").astype(out)
    assert got.dtype == out and got.flags.c_contiguous and got.tobytes() == want.tobytes()


@pytest.mark.parametrize(("name", "dtype"), [
    ("fft", np.complex64), ("ifft", np.float64), ("rfft", np.float32), ("irfft", np.complex128)])
def test_the_steps_compute_in_the_inputs_precision(name, dtype) -> None:
    x = _data(dtype).T  # (12, 4), transformed along axis 0
    step = getattr(cpu_fft, f"{name}_step")
    got = step(x, shape=x.shape, axis=0, length=8, norm="forward")
    want = getattr(np.fft, name)(x, n=8, axis=0, norm="forward")
    assert got.flags.c_contiguous and got.shape == want.shape
    assert got.tobytes() == np.ascontiguousarray(want.astype(got.dtype)).tobytes()


def test_a_dtype_a_transform_does_not_take_is_refused_naming_the_accepted_ones() -> None:
    with pytest.raises(TypeError, match=r"rfft takes float32, float64 input, got complex64; cast it first"):
        cpu_fft.rfft(np.zeros(4, np.complex64))
