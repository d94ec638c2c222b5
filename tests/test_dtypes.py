"""`lazyfuel.dtypes`: each element type's name, suffix, width and numpy twin; names and numpy
dtypes parsed (errors naming what is accepted, a non-native byte order told apart from an
unsupported dtype); values converted to native byte order bit for bit."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from lazyfuel.dtypes import DType, as_native, names, native

RNG = np.random.default_rng()


def test_each_type_has_its_suffix_width_and_numpy_twin():
    for d in DType:
        assert d.suffix == d.name.lower() and d.itemsize == d.numpy.itemsize
        assert DType.from_numpy(d.numpy) is d and DType.parse(d.name) is d is DType.parse(d)
        assert str(d) == repr(d) == d.name
    assert DType.BF16.numpy == np.dtype(ml_dtypes.bfloat16) and DType.BOOL.numpy == np.bool_
    assert len({d.numpy for d in DType}) == len(DType)


def test_numpy_dtypes_are_found_by_type_or_name():
    assert DType.from_numpy(np.float32) is DType.F32 and DType.from_numpy("complex128") is DType.C128
    assert DType.from_numpy(np.dtype("<u2")) is DType.U16


def test_a_name_is_case_sensitive_and_an_unknown_one_names_the_accepted():
    with pytest.raises(ValueError, match=rf"^unknown dtype 'f32'; expected one of {names()}$"):
        DType.parse("f32")
    with pytest.raises(ValueError, match=r"^unknown dtype None; expected one of F32 F16 BF16 "):
        DType.parse(None)  # type: ignore[arg-type]
    assert names().split() == [d.name for d in DType]


@pytest.mark.parametrize("dtype", ["float128", "datetime64[ns]", "U4", "O", "V8"])
def test_an_unsupported_dtype_is_a_type_error_naming_the_handled_ones(dtype: str):
    handled = ", ".join(str(d.numpy) for d in DType)
    with pytest.raises(TypeError) as caught:
        DType.from_numpy(dtype)
    assert str(caught.value) == f"unsupported numpy dtype {np.dtype(dtype)}; lazyfuel handles {handled}"


def test_a_non_native_byte_order_says_how_to_convert():
    swapped = np.dtype(np.int32).newbyteorder("S")
    with pytest.raises(TypeError, match=rf"^numpy dtype {swapped.str} is in non-native byte order; kernels "
                                        rf"take int32 \(lf\.from_array"):
        DType.from_numpy(swapped)


def test_native_order_is_one_pass_and_keeps_the_values():
    assert native(">f8") == np.float64 and native(">f8").isnative
    f4 = np.dtype("=f4")
    assert native(f4) is f4  # a native one unchanged
    a = RNG.standard_normal(257).astype(np.float64)
    big = a.astype(a.dtype.newbyteorder("S"))
    back = as_native(big)
    assert back.dtype.isnative and back.tobytes() == a.tobytes()
    assert as_native(a) is a
    ints = RNG.integers(-(2**15), 2**15, 64, dtype=np.int16)
    assert as_native(ints.astype(">i2")).tobytes() == ints.astype("=i2").tobytes()
