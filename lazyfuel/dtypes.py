"""Element types lazyfuel knows, their names in contract documents and their numpy twins.

A `DType` is named as in the contract documents (`F32`, `BF16`, `BOOL`, `I16` …), has the suffix that
entry points fan to (`f32`, `bf16` …), a byte width, and a numpy dtype (bf16 through `ml_dtypes`).
"""

from __future__ import annotations

import enum
from functools import cache

import ml_dtypes
import numpy as np


class DType(enum.Enum):
    """An element type: value is (suffix, byte width, numpy dtype)."""

    F32 = ("f32", 4, np.dtype(np.float32))
    F16 = ("f16", 2, np.dtype(np.float16))
    BF16 = ("bf16", 2, np.dtype(ml_dtypes.bfloat16))
    F64 = ("f64", 8, np.dtype(np.float64))
    U8 = ("u8", 1, np.dtype(np.uint8))
    U32 = ("u32", 4, np.dtype(np.uint32))
    BOOL = ("bool", 1, np.dtype(np.bool_))
    I32 = ("i32", 4, np.dtype(np.int32))
    I64 = ("i64", 8, np.dtype(np.int64))
    C64 = ("c64", 8, np.dtype(np.complex64))
    C128 = ("c128", 16, np.dtype(np.complex128))
    I8 = ("i8", 1, np.dtype(np.int8))
    I16 = ("i16", 2, np.dtype(np.int16))
    U16 = ("u16", 2, np.dtype(np.uint16))
    U64 = ("u64", 8, np.dtype(np.uint64))

    @property
    def suffix(self) -> str:
        """The entry-point suffix: `index_select` fans to `index_select_<suffix>`."""
        return self.value[0]

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self.value[1]

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype holding this type's elements."""
        return self.value[2]

    def __repr__(self) -> str:
        return self.name

    def __str__(self) -> str:
        return self.name

    @classmethod
    def parse(cls, name: str | DType) -> DType:
        """The DType named `name` (`"F32"`, case-sensitive as in the documents); ValueError if none."""
        if isinstance(name, DType):
            return name
        try:
            return cls[name]
        except (KeyError, TypeError):
            raise ValueError(f"unknown dtype {name!r}; expected one of {names()}") from None

    @classmethod
    def from_numpy(cls, dtype: np.dtype | type | str) -> DType:
        """The DType of a numpy dtype; TypeError naming the accepted dtypes if it has none."""
        dtype = np.dtype(dtype)
        found = _by_numpy().get(dtype)
        if found is None and dtype.kind != "V" and _by_numpy().get(native(dtype)) is not None:
            raise TypeError(f"numpy dtype {dtype.str} is in non-native byte order; kernels take "
                            f"{native(dtype)} (lf.from_array, lf.from_zarr and index arguments "
                            f"convert it; here pass a.astype(a.dtype.newbyteorder('=')))")
        if found is None:
            accepted = ", ".join(str(d.numpy) for d in cls)
            raise TypeError(f"unsupported numpy dtype {dtype}; lazyfuel handles {accepted}")
        return found


def native(dtype: np.dtype | type | str) -> np.dtype:
    """`dtype` in this machine's byte order (`>i4` -> `int32` on x86); a native one unchanged."""
    dtype = np.dtype(dtype)
    return dtype if dtype.isnative else dtype.newbyteorder("=")


def as_native(a: np.ndarray) -> np.ndarray:
    """`a` with its values in this machine's byte order (one pass; `a` itself when it is already)."""
    return a if a.dtype.isnative else a.astype(native(a.dtype))


def names() -> str:
    """The dtype names, space-separated, for error messages."""
    return " ".join(d.name for d in DType)


@cache
def _by_numpy() -> dict[np.dtype, DType]:
    return {d.numpy: d for d in DType}
