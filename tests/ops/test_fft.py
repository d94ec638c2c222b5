"""The FFT specs (`ops.fft`): kinds by name, arguments checked with the cast or the accepted values
named, the step's params and output shape, and the double-precision numpy reference."""

from __future__ import annotations

import numpy as np
import pytest

from lazyfuel.contracts.model import OpKind
from lazyfuel.dtypes import DType
from lazyfuel.ops.fft import FftParams, check_args, kind_of, out_dtype, plan, reference


def test_kinds_are_found_by_name_and_an_unknown_one_names_the_four() -> None:
    assert kind_of("Rfft") is OpKind.Rfft
    with pytest.raises(ValueError, match=r"unknown transform 'Dct'; expected one of Fft, Ifft, Rfft, Irfft"):
        kind_of("Dct")


def test_check_args_gives_the_output_dtype_and_the_axis_or_names_the_fix() -> None:
    assert check_args(OpKind.Rfft, np.float32, 3, -1, None, "ortho") == (np.dtype(np.complex64), 2)
    assert check_args(OpKind.Irfft, np.complex128, 2, 0, 8, None) == (np.dtype(np.float64), 0)
    with pytest.raises(TypeError, match=r"rfft takes float32 or float64 \(x.real for complex data\) data, "
                                        r"got complex64; cast it first"):
        check_args(OpKind.Rfft, np.complex64, 1, 0, None, None)
    with pytest.raises(ValueError, match="fft needs an array of at least one dimension, got a 0-d array"):
        check_args(OpKind.Fft, np.complex64, 0, 0, None, None)
    with pytest.raises(TypeError, match="fft: axis must be an integer, got float"):
        check_args(OpKind.Fft, np.complex64, 1, 0.0, None, None)
    with pytest.raises(TypeError, match="ifft: n must be an integer or None, got str"):
        check_args(OpKind.Ifft, np.complex64, 1, 0, "8", None)
    with pytest.raises(ValueError, match=r"fft: invalid norm 'unit'; expected None, 'backward', 'ortho'"):
        check_args(OpKind.Fft, np.complex64, 1, 0, None, "unit")
    with pytest.raises(IndexError):
        check_args(OpKind.Fft, np.complex64, 2, 2, None, None)


def test_plan_gives_the_params_and_the_output_shape() -> None:
    params, out = plan(OpKind.Rfft, [(4, 10)], DType.F32, {})
    assert params == FftParams((4, 10), 1, 10, "backward", 4) and out == (4, 6)
    params, out = plan(OpKind.Irfft, [(3, 6)], DType.C64, {"axis": 1, "norm": "forward"})
    assert params == FftParams((3, 6), 1, 10, "forward", 4) and out == (3, 10)
    params, out = plan(OpKind.Fft, [(5, 2)], DType.C64, {"axis": 0, "n": 8})
    assert params.length == 8 and params.log2_length == 3 and out == (8, 2)
    with pytest.raises(ValueError, match=r"invalid number of data points \(0\) specified; "
                                         r"n must be an integer >= 1"):
        plan(OpKind.Fft, [(5,)], DType.C64, {"n": 0})


def test_the_reference_is_numpys_in_double_precision_as_the_promised_dtype() -> None:
    x = np.random.default_rng(4).standard_normal((3, 8)).astype(np.float32)
    got = reference("rfft", x[:, ::-1], None, 1, "ortho")
    want = np.fft.rfft(x[:, ::-1].astype(np.float64), axis=1, norm="ortho").astype(np.complex64)
    assert got.dtype == np.complex64 and got.flags.c_contiguous and got.tobytes() == want.tobytes()
    assert out_dtype("ifft", np.dtype(np.float64)) == np.complex128
    with pytest.raises(TypeError, match=r"irfft takes complex64, complex128 input, got float32; "
                                        r"cast it first"):
        out_dtype("irfft", np.dtype(np.float32))
