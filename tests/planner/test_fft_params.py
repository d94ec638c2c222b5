"""The planner's FFT rows: op params and output shapes as numpy.fft defines them, and their errors."""

from __future__ import annotations

import numpy as np
import pytest

from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.ops import spec_for
from lazyfuel.planner import Chain, OpNode, Planner
from lazyfuel.providers import default_registry

NUMPY = {OpKind.Fft: np.fft.fft, OpKind.Ifft: np.fft.ifft, OpKind.Rfft: np.fft.rfft,
         OpKind.Irfft: np.fft.irfft}


@pytest.mark.parametrize("kind", list(NUMPY))
@pytest.mark.parametrize(("shape", "axis", "n"), [((8,), -1, None), ((3, 7), 0, None), ((3, 7), 1, 12),
                                                   ((2, 5, 6), -2, 3), ((4, 9), -1, 1)])
def test_out_shape_is_numpys(kind: OpKind, shape: tuple[int, ...], axis: int, n: int | None) -> None:
    params, out = spec_for(kind).params([shape], DType.F32, {"axis": axis, "n": n, "norm": None})
    expected = NUMPY[kind](np.zeros(shape), n=n, axis=axis).shape
    assert out == expected
    assert params["axis"] == axis % len(shape) and params["shape"] == shape and params["norm"] == "backward"
    assert params["length"] >= 1 and 2 ** params["log2_length"] >= params["length"]


def test_default_lengths() -> None:
    assert spec_for(OpKind.Irfft).params([(4, 5)], DType.C64, {})[0]["length"] == 8  # 2 * (m - 1)
    assert spec_for(OpKind.Rfft).params([(4, 5)], DType.F32, {})[0]["length"] == 5
    assert spec_for(OpKind.Fft).params([(4, 5)], DType.C64, {"axis": 0})[0]["length"] == 4
    assert spec_for(OpKind.Fft).params([(4, 5)], DType.C64, {"n": np.int64(6)})[0]["length"] == 6


@pytest.mark.parametrize(("attrs", "message"), [
    ({"n": 0}, r"Rfft: invalid number of data points \(0\) specified; n must be an integer >= 1"),
    ({"n": 2.0}, r"invalid number of data points \(2.0\)"),
    ({"norm": "unit"}, r"Rfft: norm 'unit'; expected None or one of backward, ortho, forward"),
])
def test_bad_attrs_raise_value_error(attrs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        spec_for(OpKind.Rfft).params([(4, 5)], DType.F32, attrs)


def test_irfft_of_one_point_needs_n() -> None:
    with pytest.raises(ValueError, match=r"invalid number of data points \(0\)"):
        spec_for(OpKind.Irfft).params([(3, 1)], DType.C64, {})


def test_zero_d_and_bad_axis_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one dimension"):
        spec_for(OpKind.Fft).params([()], DType.C64, {})
    with pytest.raises(IndexError, match="dim 2 is out of range"):
        spec_for(OpKind.Fft).params([(3, 4)], DType.C64, {"axis": 2})


def test_the_output_dtype_comes_from_the_binding() -> None:
    chain = Chain(1, (OpNode("Rfft", (0,), (("axis", -1), ("n", None), ("norm", None))),), (1,))
    registry = default_registry()
    program = Planner(registry, [Backend.Cpu]).plan(chain, [DType.F64], [Layout.contiguous((3, 10))])
    (step,) = program.steps
    assert step.out_dtype is DType.C128 and step.out_shape == (3, 6)
    assert step.binding.dtypes == (DType.F64, DType.C128)
